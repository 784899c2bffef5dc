package webserver

import (
	"encoding/json"
	"maps"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func testWebServer() *deckhandv1alpha1.WebServer {
	return &deckhandv1alpha1.WebServer{
		ObjectMeta: metav1.ObjectMeta{Name: "site", Namespace: "web", UID: "uid-1", Generation: 3},
		Spec: deckhandv1alpha1.WebServerSpec{
			Image:       "nginx:1.27",
			Port:        8080,
			Replicas:    ptr.To[int32](2),
			ServiceType: corev1.ServiceTypeNodePort,
			Env:         []corev1.EnvVar{{Name: "GREETING", Value: "hi"}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.5")},
			},
			PodAnnotations: map[string]string{"team": "web"},
			PodLabels:      map[string]string{"tier": "front"},
		},
	}
}

// built builds the apply configuration desired makes of ws and converts it
// into obj, the object it describes.
func built[A any, T any](t *testing.T, ws *deckhandv1alpha1.WebServer, desired func(*deckhandv1alpha1.WebServer) (A, error), obj T) T {
	t.Helper()
	ac, err := desired(ws)
	if err != nil {
		t.Fatal(err)
	}
	if err := convert(ac, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// liveDeployment turns an apply configuration into the object the API server
// would hold after applying it, plus fields others set.
func liveDeployment(t *testing.T, ws *deckhandv1alpha1.WebServer) *appsv1.Deployment {
	t.Helper()
	d := built(t, ws, desiredDeployment, &appsv1.Deployment{})
	// What defaulting and other managers add.
	d.ResourceVersion = "7"
	d.Spec.Strategy.Type = appsv1.RollingUpdateDeploymentStrategyType
	d.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = "2026-01-01T00:00:00Z"
	d.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	d.Spec.Template.Spec.Containers[0].Ports[0].HostPort = 0
	d.Spec.Template.Spec.Containers[0].ReadinessProbe.TimeoutSeconds = 1
	d.Status.Replicas = 2
	return d
}

func TestDesiredDeployment(t *testing.T) {
	ws := testWebServer()
	d := liveDeployment(t, ws)

	wantSel := map[string]string{"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": "site"}
	if got := d.Spec.Selector.MatchLabels; !maps.Equal(got, wantSel) {
		t.Errorf("selector = %v, want %v", got, wantSel)
	}
	if got := d.Spec.Template.Labels; got["tier"] != "front" || got["app.kubernetes.io/instance"] != "site" || got["app.kubernetes.io/managed-by"] != "deckhand" {
		t.Errorf("template labels = %v", got)
	}
	if d.Labels["app.kubernetes.io/managed-by"] != "deckhand" {
		t.Errorf("labels = %v", d.Labels)
	}
	if ref := metav1.GetControllerOf(d); ref == nil || ref.UID != "uid-1" || ref.Kind != "WebServer" || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("controller reference = %+v", ref)
	}
	if got := ptr.Deref(d.Spec.Replicas, -1); got != 2 {
		t.Errorf("replicas = %d, want 2", got)
	}
	if d.Annotations[deckhandv1alpha1.WebServerOwnsReplicasAnnotation] != "true" || d.Annotations[deckhandv1alpha1.WebServerAppliedHashAnnotation] == "" {
		t.Errorf("annotations = %v", d.Annotations)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "nginx:1.27" || c.Ports[0].ContainerPort != 8080 || c.Env[0].Value != "hi" || c.Resources.Requests.Cpu().String() != "500m" {
		t.Errorf("container = %+v", c)
	}
	if p := c.ReadinessProbe; p == nil || p.TCPSocket == nil || p.TCPSocket.Port != intstr.FromInt32(8080) {
		t.Errorf("default readiness probe = %+v", p)
	}

	// Unset replicas: the field is left out entirely, and so is the marker
	// that Deckhand owns it.
	ws.Spec.Replicas = nil
	ac, err := desiredDeployment(ws)
	if err != nil {
		t.Fatal(err)
	}
	if ac.Spec.Replicas != nil || ac.Annotations[deckhandv1alpha1.WebServerOwnsReplicasAnnotation] != "" {
		t.Errorf("unset replicas: apply configuration has replicas %v, annotations %v", ac.Spec.Replicas, ac.Annotations)
	}

	// A readiness probe override replaces the default.
	ws.Spec.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}}
	d = liveDeployment(t, ws)
	if p := d.Spec.Template.Spec.Containers[0].ReadinessProbe; p.TCPSocket != nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("probe override = %+v", p)
	}
}

func TestDesiredService(t *testing.T) {
	ws := testWebServer()
	s := built(t, ws, desiredService, &corev1.Service{})
	if s.Spec.Type != corev1.ServiceTypeNodePort || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 8080 ||
		s.Spec.Ports[0].TargetPort != intstr.FromString("http") || s.Spec.Selector["app.kubernetes.io/instance"] != "site" {
		t.Errorf("service spec = %+v", s.Spec)
	}
	// Fields the API server allocates are never part of what Deckhand applies.
	if s.Spec.ClusterIP != "" || len(s.Spec.ClusterIPs) != 0 || s.Spec.Ports[0].NodePort != 0 || s.Spec.HealthCheckNodePort != 0 {
		t.Errorf("service apply configuration sets allocated fields: %+v", s.Spec)
	}
	ws.Spec.ServiceType = ""
	ac, _ := desiredService(ws)
	if *ac.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("default service type = %s", *ac.Spec.Type)
	}
	if URL(ws) != "http://site.web.svc:8080" {
		t.Errorf("URL = %s", URL(ws))
	}
}

func TestUpToDate(t *testing.T) {
	cases := map[string]struct {
		edit func(ws *deckhandv1alpha1.WebServer, live *appsv1.Deployment)
		want bool
	}{
		"unchanged, with fields others own": {edit: func(*deckhandv1alpha1.WebServer, *appsv1.Deployment) {}, want: true},
		"scaled by someone, replicas unset": {edit: func(ws *deckhandv1alpha1.WebServer, l *appsv1.Deployment) {
			ws.Spec.Replicas = nil
			l.Spec.Replicas = ptr.To[int32](9)
			delete(l.Annotations, deckhandv1alpha1.WebServerOwnsReplicasAnnotation)
			setHash(t, ws, l)
		}, want: true},
		"scaled by someone, replicas set": {edit: func(_ *deckhandv1alpha1.WebServer, l *appsv1.Deployment) { l.Spec.Replicas = ptr.To[int32](9) }, want: false},
		"image edited by hand": {edit: func(_ *deckhandv1alpha1.WebServer, l *appsv1.Deployment) {
			l.Spec.Template.Spec.Containers[0].Image = "httpd"
		}, want: false},
		"owned pod annotation removed":     {edit: func(_ *deckhandv1alpha1.WebServer, l *appsv1.Deployment) { delete(l.Spec.Template.Annotations, "team") }, want: false},
		"spec image changed":               {edit: func(ws *deckhandv1alpha1.WebServer, _ *appsv1.Deployment) { ws.Spec.Image = "nginx:1.28" }, want: false},
		"pod annotation dropped from spec": {edit: func(ws *deckhandv1alpha1.WebServer, _ *appsv1.Deployment) { ws.Spec.PodAnnotations = nil }, want: false},
		"env var dropped from spec":        {edit: func(ws *deckhandv1alpha1.WebServer, _ *appsv1.Deployment) { ws.Spec.Env = nil }, want: false},
		"env var added by hand": {edit: func(_ *deckhandv1alpha1.WebServer, l *appsv1.Deployment) {
			c := &l.Spec.Template.Spec.Containers[0]
			c.Env = append(c.Env, corev1.EnvVar{Name: "X", Value: "y"})
		}, want: false},
		"cpu written differently, same size": {edit: func(ws *deckhandv1alpha1.WebServer, _ *appsv1.Deployment) {
			ws.Spec.Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
		}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ws := testWebServer()
			live := liveDeployment(t, ws)
			tc.edit(ws, live)
			desired, err := desiredDeployment(ws)
			if err != nil {
				t.Fatal(err)
			}
			got, err := upToDate(desired, live)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("upToDate = %v, want %v", got, tc.want)
			}
		})
	}
}

// setHash gives live the applied-hash annotation of ws's current desired state.
func setHash(t *testing.T, ws *deckhandv1alpha1.WebServer, live *appsv1.Deployment) {
	ac, err := desiredDeployment(ws)
	if err != nil {
		t.Fatal(err)
	}
	live.Annotations[deckhandv1alpha1.WebServerAppliedHashAnnotation] = ac.Annotations[deckhandv1alpha1.WebServerAppliedHashAnnotation]
}

func TestContains(t *testing.T) {
	parse := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		live, desired string
		want          bool
	}{
		{`{"a":1,"b":2}`, `{"a":1}`, true},
		{`{"a":1}`, `{"a":1,"b":2}`, false},
		{`{"a":{"x":[1,{"k":"v","extra":true}]}}`, `{"a":{"x":[1,{"k":"v"}]}}`, true},
		{`{"a":[1,2]}`, `{"a":[1]}`, false},
		{`{"a":"1"}`, `{"a":1}`, false},
		{`{"a":null}`, `{"a":{}}`, false},
	}
	for _, c := range cases {
		if got := contains(parse(c.live), parse(c.desired)); got != c.want {
			t.Errorf("contains(%s, %s) = %v, want %v", c.live, c.desired, got, c.want)
		}
	}
}
