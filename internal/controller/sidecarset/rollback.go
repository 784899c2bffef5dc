package sidecarset

import (
	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// rollbackScope returns, while a failed rollout rolls back (onFailure
// Rollback, as the persisted status says), a copy of sc whose SidecarSet
// and compiled form are the stable revision's and whose pods are judged
// against it, so that the rollout pass moves them there as it would to the
// latest revision: within maxUnavailable, the pods that are not ready
// first. nil when there is nothing to roll back to: the failed rollout is
// then held. The spec is the user's and stays as it is.
func (r *Reconciler) rollbackScope(sc *scope) *scope {
	s := sc.set
	if !rolloutFailed(s, sc.compiled.Hash) || s.Spec.UpdateStrategy.OnFailure != deckhandv1alpha1.RollbackRolloutFailurePolicy {
		return nil
	}
	set, compiled, ok := r.Lister.RevisionForm(s, s.Status.StableRevision)
	if !ok {
		return nil
	}
	rb := *sc
	rb.set, rb.compiled = set, compiled
	in := classifyInput{set: set, compiled: compiled, now: sc.now, deferredTimeout: r.ResizeDeferredTimeout,
		resizeRefused: sc.memory.recreates.refusedResizes(), running: r.Lister.RunningRevisions(s)}
	rb.pods = (*classifyCache)(nil).classifyPods(in, podsOf(sc.pods))
	for i, p := range sc.pods {
		rb.pods[i].pending = p.pending
	}
	return &rb
}

// podsOf returns the pods of states, in order.
func podsOf(states []*podState) []*corev1.Pod {
	pods := make([]*corev1.Pod, len(states))
	for i, p := range states {
		pods[i] = p.pod
	}
	return pods
}
