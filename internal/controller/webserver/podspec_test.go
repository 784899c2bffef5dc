package webserver_test

import (
	"context"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// The pod fields of a WebServer reach its Deployment's pod template as
// written, the API server takes them, and the pods run; without them the
// pods stop with a drain of DefaultDrainSeconds.
func TestPodFieldsReachThePods(t *testing.T) {
	ns := env.Namespace(t)
	ws := newWebServer(ns, "full", ptr.To[int32](1))
	health := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}, PeriodSeconds: 20}
	ws.Spec.LivenessProbe = health
	ws.Spec.StartupProbe = &corev1.Probe{ProbeHandler: health.ProbeHandler, FailureThreshold: 30, PeriodSeconds: 2}
	ws.Spec.Command = []string{"/usr/sbin/nginx"}
	ws.Spec.Args = []string{"-g", "daemon off;"}
	ws.Spec.EnvFrom = []corev1.EnvFromSource{{Prefix: "CFG_", ConfigMapRef: &corev1.ConfigMapEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "site-config"}, Optional: ptr.To(true)}}}
	ws.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry"}}
	ws.Spec.ServiceAccountName = "default"
	ws.Spec.DrainSeconds = ptr.To[int32](10)
	ws.Spec.TerminationGracePeriodSeconds = ptr.To[int64](45)
	ws.Spec.Env = []corev1.EnvVar{{Name: "GREETING", Value: "hello"}}
	ws.Spec.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	testutil.Create(ctx(t), t, env.Client, ws)

	d := waitDeployment(t, ns, "full", "the pod fields", func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas == 1 })
	spec := d.Spec.Template.Spec
	c := spec.Containers[0]
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.StartupProbe == nil || c.StartupProbe.FailureThreshold != 30 {
		t.Errorf("probes: liveness %+v, startup %+v", c.LivenessProbe, c.StartupProbe)
	}
	if !reflect.DeepEqual(c.Command, ws.Spec.Command) || !reflect.DeepEqual(c.Args, ws.Spec.Args) ||
		len(c.EnvFrom) != 1 || c.EnvFrom[0].Prefix != "CFG_" || c.EnvFrom[0].ConfigMapRef.Name != "site-config" {
		t.Errorf("command %v, args %v, envFrom %+v", c.Command, c.Args, c.EnvFrom)
	}
	if !reflect.DeepEqual(c.Env, ws.Spec.Env) || !equality.Semantic.DeepEqual(c.Resources, ws.Spec.Resources) {
		t.Errorf("env %+v, resources %+v; want the WebServer's %+v, %+v", c.Env, c.Resources, ws.Spec.Env, ws.Spec.Resources)
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != 10 {
		t.Errorf("lifecycle %+v, want a preStop sleep of 10 s", c.Lifecycle)
	}
	if len(spec.ImagePullSecrets) != 1 || spec.ImagePullSecrets[0].Name != "registry" || spec.ServiceAccountName != "default" ||
		spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds != 45 {
		t.Errorf("pull secrets %v, service account %q, grace %v", spec.ImagePullSecrets, spec.ServiceAccountName, spec.TerminationGracePeriodSeconds)
	}

	// Unset, the drain is the default; 0 turns it off.
	plain, plainNS := createWebServer(t, "plain", ptr.To[int32](1))
	waitDeployment(t, plainNS, plain.Name, "a default drain", func(d *appsv1.Deployment) bool {
		l := d.Spec.Template.Spec.Containers[0].Lifecycle
		return l != nil && l.PreStop != nil && l.PreStop.Sleep != nil && l.PreStop.Sleep.Seconds == 5
	})
	update(t, plainNS, plain.Name, func(ws *deckhandv1alpha1.WebServer) { ws.Spec.DrainSeconds = ptr.To[int32](0) })
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		d, err := getDeployment(ctx, plainNS, plain.Name)
		return err == nil && d.Spec.Template.Spec.Containers[0].Lifecycle == nil, err
	}, "no preStop hook with drainSeconds 0")
}
