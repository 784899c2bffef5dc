package webserver

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// The end-to-end table (internal/controller/webserver) runs these against the
// real API server; this one checks the webhook alone, including what the CRD
// schema would catch first.
func TestValidate(t *testing.T) {
	cases := map[string]struct {
		name   string
		mutate func(s *deckhandv1alpha1.WebServerSpec)
		field  string // "" means valid
	}{
		"valid":                     {mutate: func(*deckhandv1alpha1.WebServerSpec) {}},
		"relaxed env name is valid": {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Env = []corev1.EnvVar{{Name: "my.var-1 x", Value: "v"}} }},
		"named probe port is valid": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}}
		}},
		"name":           {name: "Site", mutate: func(*deckhandv1alpha1.WebServerSpec) {}, field: "metadata.name"},
		"env name =":     {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Env = []corev1.EnvVar{{Name: "A=B"}} }, field: "spec.env[0].name"},
		"env name empty": {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Env = []corev1.EnvVar{{Name: ""}} }, field: "spec.env[0].name"},
		"env duplicate":  {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Env = []corev1.EnvVar{{Name: "A"}, {Name: "A"}} }, field: "spec.env[1].name"},
		"env no source": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.Env = []corev1.EnvVar{{Name: "A", ValueFrom: &corev1.EnvVarSource{}}}
		}, field: "spec.env[0].valueFrom"},
		"selector label": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.PodLabels = map[string]string{"app.kubernetes.io/name": "x"}
		}, field: "spec.podLabels[app.kubernetes.io/name]"},
		"label value":    {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.PodLabels = map[string]string{"a": "b c"} }, field: "spec.podLabels"},
		"annotation key": {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.PodAnnotations = map[string]string{"a b": "x"} }, field: "spec.podAnnotations"},
		"request > limit": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.Resources.Requests = corev1.ResourceList{"memory": resource.MustParse("2Gi")}
			s.Resources.Limits = corev1.ResourceList{"memory": resource.MustParse("1Gi")}
		}, field: "spec.resources.requests[memory]"},
		"probe no handler": {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.ReadinessProbe = &corev1.Probe{} }, field: "spec.readinessProbe"},
		"probe bad port": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(70000)}}}
		}, field: "spec.readinessProbe.tcpSocket.port"},
		"probe negative": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(80)}}, PeriodSeconds: -1}
		}, field: "spec.readinessProbe.periodSeconds"},
		"liveness success threshold": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt(80)}}, SuccessThreshold: 2}
		}, field: "spec.livenessProbe.successThreshold"},
		"startup no handler": {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.StartupProbe = &corev1.Probe{} }, field: "spec.startupProbe"},
		"envFrom both sources": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{}, SecretRef: &corev1.SecretEnvSource{}}}
		}, field: "spec.envFrom[0]"},
		"envFrom bad name": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "Bad_Name"}}}}
		}, field: "spec.envFrom[0].secretRef.name"},
		"envFrom prefix": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.EnvFrom = []corev1.EnvFromSource{{Prefix: "A=", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "site-config"}}}}
		}, field: "spec.envFrom[0].prefix"},
		"envFrom is valid": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.EnvFrom = []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "site-config"}}}}
		}},
		"pull secret name": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: ""}}
		},
			field: "spec.imagePullSecrets[0].name"},
		"ingress TLS secret name": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.Ingress = &deckhandv1alpha1.WebServerIngress{Host: "shop.example.com", TLS: &deckhandv1alpha1.WebServerTLS{SecretName: "Shop_TLS"}}
		}, field: "spec.ingress.tls.secretName"},
		"ingress class name": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.Ingress = &deckhandv1alpha1.WebServerIngress{Host: "shop.example.com", ClassName: ptr.To("Public Class")}
		}, field: "spec.ingress.className"},
		"service account name": {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.ServiceAccountName = "Web Site" }, field: "spec.serviceAccountName"},
		"drain not below the default grace period": {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.DrainSeconds = ptr.To[int32](30) },
			field: "spec.drainSeconds"},
		"drain below a longer grace period is valid": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.DrainSeconds, s.TerminationGracePeriodSeconds = ptr.To[int32](30), ptr.To[int64](60)
		}},
	}
	for desc, tc := range cases {
		t.Run(desc, func(t *testing.T) {
			name := tc.name
			if name == "" {
				name = "site"
			}
			ws := &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "web"}, Spec: deckhandv1alpha1.WebServerSpec{Image: "nginx", Port: 80}}
			tc.mutate(&ws.Spec)
			_, err := (&Validator{}).ValidateCreate(context.Background(), ws)
			testutil.WantError(t, err, tc.field)
		})
	}
	// Renaming is impossible anyway; updates do not re-check the name.
	old := &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Name: "Legacy"}, Spec: deckhandv1alpha1.WebServerSpec{Image: "nginx"}}
	if _, err := (&Validator{}).ValidateUpdate(context.Background(), old, old.DeepCopy()); err != nil {
		t.Errorf("update of an existing object: %v", err)
	}
}
