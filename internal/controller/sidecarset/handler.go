package sidecarset

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// DefaultPodEventDelay batches pod events. A reconcile reads every pod the
// SidecarSet selects, so reconciling once per pod event costs
// O(matched pods) per pod: quadratic over a burst of pod creations, and in
// the admission benchmark (docs/benchmarks.md, item 1) this controller took
// the CPU the API server needed. Counts a second old are fine for status,
// and an in-place rollout step already waits for kubelet to restart a
// container; SidecarSet changes themselves are reconciled at once.
const DefaultPodEventDelay = time.Second

// Pod events of a SidecarSet whose reconcile is slow wait longer:
// podEventCostFactor times its last reconcile, at most maxPodEventDelay
// (TestPodEventDelayFollowsReconcileCost). So, while pods are created one by one,
// reconciles for pod events take at most about a tenth of a worker's time
// for any number of matched pods up to a reconcile of maxPodEventDelay /
// podEventCostFactor, and the status lags pod events by at most
// maxPodEventDelay.
const (
	podEventCostFactor = 10
	maxPodEventDelay   = 10 * time.Second
)

// podEventHandler enqueues the SidecarSets a pod event concerns after
// PodEventDelay; the queue keeps one entry per SidecarSet, so a burst of pod
// events becomes one reconcile per SidecarSet per delay.
func (r *Reconciler) podEventHandler() handler.EventHandler {
	delay := r.PodEventDelay
	if delay <= 0 {
		delay = DefaultPodEventDelay
	}
	// after is 0 for an event that must not wait, else the base delay.
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], after time.Duration, pods ...client.Object) {
		for _, pod := range pods {
			for _, req := range r.podToSidecarSets(ctx, pod) {
				if after > 0 {
					q.AddAfter(req, r.memory.podEventDelay(req.Name, after))
				} else {
					q.Add(req)
				}
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, delay, e.Object)
		},
		// Both pods of an update: a SidecarSet that the pod stops matching
		// hears of it too.
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			after := delay
			if readyAgainAfterRestart(e.ObjectOld, e.ObjectNew) {
				after = 0
			}
			enqueue(ctx, q, after, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, delay, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, delay, e.Object)
		},
	}
}

// readyAgainAfterRestart reports a pod that turns Ready with a container
// that has restarted: what an in-place sidecar update looks like when the
// kubelet has restarted the container with the new image. Such a pod frees
// a slot of the rollout's maxUnavailable budget, so its SidecarSets
// reconcile at once and the next pods of the rollout move without waiting
// for the batching delay. A newly created pod turning Ready (no restart
// yet) keeps the delay, so a burst of creations still costs one reconcile
// per SidecarSet per delay.
func readyAgainAfterRestart(oldObj, newObj client.Object) bool {
	oldPod, ok := oldObj.(*corev1.Pod)
	if !ok {
		return false
	}
	newPod, ok := newObj.(*corev1.Pod)
	if !ok || podutil.IsPodReady(oldPod) || !podutil.IsPodReady(newPod) {
		return false
	}
	for _, cs := range newPod.Status.ContainerStatuses {
		if cs.RestartCount > 0 {
			return true
		}
	}
	return false
}

// podToSidecarSets maps a pod to the SidecarSets that injected it (its
// annotation) and those that select it (through the namespace index).
func (r *Reconciler) podToSidecarSets(_ context.Context, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok || r.Lister.IsProtectedNamespace(pod.Namespace) {
		return nil
	}
	seen := map[string]bool{}
	var reqs []reconcile.Request
	add := func(name string) {
		if name != "" && !seen[name] {
			seen[name] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		}
	}
	for _, name := range sidecarcontrol.ReadPodRecord(pod.Annotations).Names() {
		add(name)
	}
	cands, _ := r.Lister.Candidates(pod.Namespace)
	for _, s := range cands {
		if r.Lister.Matches(s, pod.Namespace, pod.Labels) {
			add(s.Name)
		}
	}
	return reqs
}
