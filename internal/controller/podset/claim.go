package podset

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func labelsOf(p *corev1.Pod) labels.Set { return labels.Set(p.Labels) }

// podSelector is the PodSet's pod selector, or an error when it is missing,
// invalid or empty (an empty selector would claim every pod of the
// namespace).
func podSelector(ps *deckhandv1alpha1.PodSet) (labels.Selector, error) {
	if ps.Spec.Selector == nil {
		return nil, errors.New("spec.selector is required")
	}
	sel, err := metav1.LabelSelectorAsSelector(ps.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	if sel.Empty() {
		return nil, errors.New("spec.selector must not be empty")
	}
	return sel, nil
}

// podControllerIndex indexes the cached pods by the UID of their controller,
// or orphanKey when they have none.
const podControllerIndex = "podset.apps.deckhand.dev/controller-uid"

// orphanKey is podControllerIndex's value for pods without a controller. No
// UID is empty, so it cannot collide.
const orphanKey = ""

// podControllerKey is the index function of podControllerIndex.
func podControllerKey(o client.Object) []string {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return []string{string(ref.UID)}
	}
	return []string{orphanKey}
}

// claimPods reads from the cache the pods the PodSet controls and the
// namespace's orphans, adopts matching orphans, releases owned pods that
// stopped matching and sorts the owned ones into active and terminating
// (PodControllerRefManager.ClaimPods).
//
// The ReplicaSet controller lists every pod of the namespace for this. Here
// the controller-UID index does the filtering: a namespace holds every
// PodSet's pods, and listing (even without deep copies) 10,000 pods on every
// reconcile of each of 100 PodSets dominated the manager's memory in the
// benchmark (docs/benchmarks.md, item 3).
//
// NOTE: the pods are the cache's own objects, not copies: the scope's pods
// are read-only, and whatever writes a pod (adopt, release, an in-place
// update) copies it first. Copying every claimed pod made the start-up
// reconciles of 100 PodSets of 100 pods hold about a fifth of the heap live
// at the collection that set the manager's largest heap size
// (docs/benchmark-analysis.md, item 3).
func (r *Reconciler) claimPods(ctx context.Context, s *scope) (ctrl.Result, error) {
	// NOTE: the expectations are read before the pods. Read after, a watch
	// event arriving in between could meet them while the pods read do not
	// show its write yet, and the sync would act on pods older than the
	// expectations it checked: one create or delete too many (the
	// ReplicaSet controller checks its expectations before it lists pods,
	// for the same reason).
	s.expectationsMet = r.Expectations.Satisfied(s.key)
	owned, err := r.pods.Indexed(ctx, s.ps.Namespace, podControllerIndex, string(s.ps.UID))
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing pods: %w", err)
	}
	orphans, err := r.pods.Indexed(ctx, s.ps.Namespace, podControllerIndex, orphanKey)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing pods: %w", err)
	}
	checked := false
	var canAdoptErr error
	canAdopt := func() error {
		if checked {
			return canAdoptErr
		}
		checked = true
		canAdoptErr = r.recheckOwner(ctx, s.ps)
		return canAdoptErr
	}
	var errs []error
	for _, p := range slices.Concat(owned, orphans) {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			// Finished pods are neither replicas nor worth adopting.
			continue
		}
		if !mayClaim(s, p) {
			continue
		}
		p, owned, err := r.claimPod(ctx, s, p, canAdopt)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !owned {
			continue
		}
		if p.DeletionTimestamp != nil {
			s.terminating = append(s.terminating, p)
		} else {
			s.pods = append(s.pods, p)
		}
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// mayClaim is claimPod's read-only first look: false for pods another
// controller owns and for orphans the selector does not match, which
// claimPod would leave alone anyway.
func mayClaim(s *scope, p *corev1.Pod) bool {
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		return ref.UID == s.ps.UID
	}
	return s.selector.Matches(labelsOf(p))
}

// claimPod decides whether p belongs to s.ps, adopting or releasing it. It
// returns the pod to keep: p, or the adopted copy.
func (r *Reconciler) claimPod(ctx context.Context, s *scope, p *corev1.Pod, canAdopt func() error) (*corev1.Pod, bool, error) {
	matches := s.selector.Matches(labelsOf(p))
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		if ref.UID != s.ps.UID {
			return p, false, nil // someone else's
		}
		if matches {
			return p, true, nil
		}
		// Owned but no longer matching: release, unless we are being
		// deleted (then the garbage collector takes it) or it is going away.
		if s.ps.DeletionTimestamp != nil || p.DeletionTimestamp != nil {
			return p, false, nil
		}
		return p, false, r.release(ctx, s, p)
	}
	// An orphan.
	if !matches || s.ps.DeletionTimestamp != nil || p.DeletionTimestamp != nil {
		return p, false, nil
	}
	if err := canAdopt(); err != nil {
		return p, false, err
	}
	adopted, err := r.adopt(ctx, s, p)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return p, false, nil
		}
		return p, false, err
	}
	return adopted, true, nil
}

// recheckOwner re-reads the PodSet uncached before the first adoption of a
// sync and refuses if it is being deleted or was replaced by another object
// of the same name (RecheckDeletionTimestamp upstream): the cached copy may
// be stale, and adopting into a dying owner would get the pod collected.
func (r *Reconciler) recheckOwner(ctx context.Context, ps *deckhandv1alpha1.PodSet) error {
	fresh := &deckhandv1alpha1.PodSet{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ps), fresh); err != nil {
		return fmt.Errorf("re-checking PodSet before adoption: %w", err)
	}
	if fresh.UID != ps.UID {
		return fmt.Errorf("original PodSet %s is gone: got uid %s, wanted %s", client.ObjectKeyFromObject(ps), fresh.UID, ps.UID)
	}
	if fresh.DeletionTimestamp != nil {
		return fmt.Errorf("PodSet %s is being deleted; not adopting", client.ObjectKeyFromObject(ps))
	}
	return nil
}

func controllerRef(ps *deckhandv1alpha1.PodSet) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{
		APIVersion:         deckhandv1alpha1.GroupVersion.String(),
		Kind:               "PodSet",
		Name:               ps.Name,
		UID:                ps.UID,
		Controller:         &t,
		BlockOwnerDeletion: &t,
	}
}

// adopt adds the controller reference to a copy of an orphan and returns
// the copy as patched. The patch is optimistic-locked: if the pod changed
// since it was read (e.g. another controller adopted it), the adoption
// fails and is retried on fresh data.
func (r *Reconciler) adopt(ctx context.Context, s *scope, p *corev1.Pod) (*corev1.Pod, error) {
	adopted := p.DeepCopy()
	adopted.OwnerReferences = append(adopted.OwnerReferences, controllerRef(s.ps))
	err := r.PodWriter.Patch(ctx, adopted, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(deckhandv1alpha1.FieldManager))
	podOps.WithLabelValues("adopt", result(err)).Inc()
	if err != nil {
		return nil, err
	}
	s.wrote = true
	log.FromContext(ctx).V(1).Info("adopted pod", "podset", klog.KObj(s.ps), "pod", klog.KObj(p))
	return adopted, nil
}

// release removes the PodSet's owner reference from a pod that no longer
// matches the selector.
func (r *Reconciler) release(ctx context.Context, s *scope, p *corev1.Pod) error {
	released := p.DeepCopy()
	refs := p.OwnerReferences[:0:0]
	for _, ref := range p.OwnerReferences {
		if ref.UID != s.ps.UID {
			refs = append(refs, ref)
		}
	}
	released.OwnerReferences = refs
	err := r.PodWriter.Patch(ctx, released, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(deckhandv1alpha1.FieldManager))
	podOps.WithLabelValues("release", result(err)).Inc()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing pod %s: %w", p.Name, err)
	}
	s.wrote = true
	log.FromContext(ctx).V(1).Info("released pod", "podset", klog.KObj(s.ps), "pod", klog.KObj(p))
	return nil
}
