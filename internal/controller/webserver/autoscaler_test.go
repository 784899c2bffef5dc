package webserver_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// autoscaler is a HorizontalPodAutoscaler of ns keeping the object of kind
// (of apiVersion) name between min and 5 replicas. It has no metric: the
// local cluster's kube-controller-manager runs the autoscaler, which scales a
// target below min up to min without reading any metric.
func autoscaler(ns, name, apiVersion, kind string, min int32) *autoscalingv2.HorizontalPodAutoscaler {
	return &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: apiVersion, Kind: kind, Name: name},
			MinReplicas:    ptr.To(min),
			MaxReplicas:    5,
		},
	}
}

// A real HorizontalPodAutoscaler scales a WebServer both ways the docs
// give: pointed at the Deployment while spec.replicas is unset (Deckhand
// never applies the size it set, across a rollout), and pointed at the
// WebServer while spec.replicas is set (through the WebServer's /scale,
// which the Deployment follows).
func TestHorizontalPodAutoscaler(t *testing.T) {
	ctx := ctx(t)
	_, ns := createWebServer(t, "free", nil)
	testutil.Create(ctx, t, env.Client, newWebServer(ns, "fixed", ptr.To[int32](1)))
	testutil.Create(ctx, t, env.Client, autoscaler(ns, "free", "apps/v1", "Deployment", 3))
	testutil.Create(ctx, t, env.Client, autoscaler(ns, "fixed", deckhandv1alpha1.GroupVersion.String(), "WebServer", 2))

	waitDeployment(t, ns, "free", "scaled to 3 by the autoscaler", func(d *appsv1.Deployment) bool {
		return ptr.Deref(d.Spec.Replicas, 0) == 3 && d.Status.ReadyReplicas == 3
	})
	update(t, ns, "free", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Image = "nginx:1.27" })
	d := waitDeployment(t, ns, "free", "image nginx:1.27 rolled out", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27" && d.Status.ObservedGeneration == d.Generation &&
			d.Status.UpdatedReplicas == d.Status.Replicas && d.Status.ReadyReplicas == d.Status.Replicas
	})
	// Deckhand's applies leave the size out: none of them owns it.
	if r, managers := ptr.Deref(d.Spec.Replicas, 0), replicasManagers(d); r != 3 || slices.Contains(managers, deckhandv1alpha1.FieldManager+"/Apply") {
		t.Errorf("Deployment free: replicas %d, managed by %v after Deckhand applied a new image; want the autoscaler's 3, never Deckhand's", r, managers)
	}

	waitWebServer(t, ns, "fixed", "spec.replicas 2 from the autoscaler", func(ws *deckhandv1alpha1.WebServer) bool {
		return ptr.Deref(ws.Spec.Replicas, 0) == 2
	})
	waitDeployment(t, ns, "fixed", "2 ready replicas", func(d *appsv1.Deployment) bool {
		return ptr.Deref(d.Spec.Replicas, 0) == 2 && d.Status.ReadyReplicas == 2
	})
}
