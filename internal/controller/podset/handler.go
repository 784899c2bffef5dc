package podset

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/expectations"
)

// podEventHandler maps pod events to PodSets and lowers expectations as the
// cache observes the controller's writes (as the ReplicaSet controller's
// addPod/updatePod/deletePod do). Orphans are mapped to every PodSet whose
// selector matches them, so that they get adopted.
type podEventHandler struct {
	client client.Reader
	exp    *expectations.Expectations
}

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func ownerRequest(p *corev1.Pod) (reconcile.Request, bool) {
	ref := metav1.GetControllerOfNoCopy(p)
	if !isPodSetRef(ref) {
		return reconcile.Request{}, false
	}
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}}, true
}

// Create implements handler.EventHandler.
func (h *podEventHandler) Create(ctx context.Context, e event.TypedCreateEvent[client.Object], q queue) {
	p, ok := e.Object.(*corev1.Pod)
	if !ok {
		return
	}
	if p.DeletionTimestamp != nil {
		// Seen for the first time already terminating (e.g. after a
		// relist): count it as a deletion.
		h.deleted(p, q)
		return
	}
	if req, ok := ownerRequest(p); ok {
		h.exp.CreationObserved(req.String())
		q.Add(req)
		return
	}
	h.enqueueMatching(ctx, p, q)
}

// Update implements handler.EventHandler.
func (h *podEventHandler) Update(ctx context.Context, e event.TypedUpdateEvent[client.Object], q queue) {
	oldPod, ok1 := e.ObjectOld.(*corev1.Pod)
	cur, ok2 := e.ObjectNew.(*corev1.Pod)
	if !ok1 || !ok2 || oldPod.ResourceVersion == cur.ResourceVersion {
		return
	}
	labelsChanged := !mapsEqual(oldPod.Labels, cur.Labels)
	if cur.DeletionTimestamp != nil {
		// A pod being deleted counts as deleted now; the final delete event
		// finds the key already observed, so it counts once.
		h.deleted(cur, q)
		if labelsChanged {
			if req, ok := ownerRequest(oldPod); ok {
				q.Add(req)
			}
		}
		return
	}
	oldReq, oldOwned := ownerRequest(oldPod)
	curReq, curOwned := ownerRequest(cur)
	if oldOwned && (!curOwned || oldReq != curReq) {
		q.Add(oldReq)
	}
	if curOwned {
		h.exp.UpdateObserved(curReq.String(), podKey(cur), cur.Labels[deckhandv1alpha1.PodSetRevisionLabel])
		h.exp.UpdateObserved(curReq.String(), gateKey(cur), gateStatus(cur))
		q.Add(curReq)
		return
	}
	if labelsChanged || oldOwned {
		h.enqueueMatching(ctx, cur, q)
	}
}

// Delete implements handler.EventHandler.
func (h *podEventHandler) Delete(_ context.Context, e event.TypedDeleteEvent[client.Object], q queue) {
	if p, ok := e.Object.(*corev1.Pod); ok {
		h.deleted(p, q)
	}
}

// Generic implements handler.EventHandler.
func (h *podEventHandler) Generic(context.Context, event.TypedGenericEvent[client.Object], queue) {}

func (h *podEventHandler) deleted(p *corev1.Pod, q queue) {
	req, ok := ownerRequest(p)
	if !ok {
		return
	}
	h.exp.DeletionObserved(req.String(), podKey(p))
	h.exp.UpdateAbandoned(req.String(), podKey(p))
	h.exp.UpdateAbandoned(req.String(), gateKey(p))
	q.Add(req)
}

// enqueueMatching enqueues every PodSet in the pod's namespace whose
// selector matches the orphan pod.
func (h *podEventHandler) enqueueMatching(ctx context.Context, p *corev1.Pod, q queue) {
	var list deckhandv1alpha1.PodSetList
	if err := h.client.List(ctx, &list, client.InNamespace(p.Namespace)); err != nil {
		log.FromContext(ctx).Error(err, "listing PodSets for an orphan pod", "pod", client.ObjectKeyFromObject(p))
		return
	}
	for i := range list.Items {
		ps := &list.Items[i]
		sel, err := podSelector(ps)
		if err != nil || !sel.Matches(labelsOf(p)) {
			continue
		}
		q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(ps)})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
