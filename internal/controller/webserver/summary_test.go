package webserver_test

import (
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/webserver"
	"github.com/deckhand-dev/deckhand/test/health"
)

// TestSummaryThroughARollout follows a WebServer through the states tools
// read from its summary conditions: Ready once rolled out, Reconciling
// while a rollout of its Deployment is under way (held here by pausing the
// Deployment, as kubectl rollout pause does), Ready again when it is done.
func TestSummaryThroughARollout(t *testing.T) {
	c, ns := ctx(t), env.Namespace(t)
	ws := newWebServer(ns, "summary", ptr.To[int32](2))
	if err := env.Client.Create(c, ws); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, ws, timeout, health.IsReady(webserver.ReasonRolloutComplete))

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ws.Name}}
	setPaused := func(paused bool) {
		patch := []byte(`{"spec":{"paused":` + strconv.FormatBool(paused) + `}}`)
		if err := env.Client.Patch(c, d, client.RawPatch("application/merge-patch+json", patch), client.FieldOwner("kubectl")); err != nil {
			t.Fatal(err)
		}
	}
	setPaused(true)
	update(t, ns, ws.Name, func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Image = "nginx:1.27" })
	health.Wait(t, env.Client, ws, timeout, health.IsReconciling(webserver.ReasonRollingOut))

	setPaused(false)
	health.Wait(t, env.Client, ws, timeout, health.IsReady(webserver.ReasonRolloutComplete))
}

// TestSummaryStalledByNameConflict gives a WebServer the name of a Service
// it does not own: stalled (kstatus Failed, Argo CD Degraded) with
// NameConflict until the Service is gone.
func TestSummaryStalledByNameConflict(t *testing.T) {
	c, ns := ctx(t), env.Namespace(t)
	theirs := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}},
	}
	if err := env.Client.Create(c, theirs); err != nil {
		t.Fatal(err)
	}
	ws := newWebServer(ns, "taken", ptr.To[int32](1))
	if err := env.Client.Create(c, ws); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, ws, timeout, health.IsStalled(webserver.ReasonNameConflict))

	if err := env.Client.Delete(c, theirs); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, ws, timeout, health.IsReady(webserver.ReasonRolloutComplete))
}

// TestSummaryStalledByQuota runs a WebServer into a ResourceQuota that
// refuses its pods: its Deployment cannot become available and reports
// ReplicaFailure, so the WebServer is stalled (kstatus Failed, Argo CD
// Degraded).
func TestSummaryStalledByQuota(t *testing.T) {
	c, ns := ctx(t), env.Namespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-pods"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}},
	}
	if err := env.Client.Create(c, quota); err != nil {
		t.Fatal(err)
	}
	ws := newWebServer(ns, "refused", ptr.To[int32](1))
	if err := env.Client.Create(c, ws); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, ws, timeout, health.IsStalled(webserver.ReasonReplicaFailure))
}
