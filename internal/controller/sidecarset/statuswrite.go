package sidecarset

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/statuspatch"
)

// writeStatus writes the status if it changed, with observedGeneration
// only when the reconcile succeeded, and emits events on condition changes.
// InjectionPolicyReady is the policy controller's to write: it is carried in
// sc.status for the summary, and neither written nor compared here.
func (r *Reconciler) writeStatus(ctx context.Context, sc *scope, ok bool) (ctrl.Result, error) {
	s := sc.set
	if sc.status.LatestRevision == "" {
		return ctrl.Result{}, nil // observePods failed before anything was computed
	}
	st := sc.status
	if ok {
		st.ObservedGeneration = s.Generation
	}
	r.recordMetrics(s.Name, &st)
	r.announce(s, &st)
	wasFailed := s.Status.FailedRevision
	w := statuspatch.Writer{Client: r.Client, FieldManager: deckhandv1alpha1.FieldManager}
	res, err := w.Status(ctx, s, &st, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition)
	// The Event follows the write that records the failure, so that it is
	// recorded once, by whichever reconcile persisted it.
	if failed := s.Status.FailedRevision; err == nil && failed != "" && failed == st.FailedRevision && failed != wasFailed {
		if c := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.RolloutFailedCondition); c != nil {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonRolloutFailed, "UpdatePods", "%s", c.Message)
		}
	}
	return res, err
}

// announce emits an event when a condition changes status or reason.
func (r *Reconciler) announce(s *deckhandv1alpha1.SidecarSet, st *deckhandv1alpha1.SidecarSetStatus) {
	for _, t := range []string{deckhandv1alpha1.SidecarSetPodsInjectedCondition, deckhandv1alpha1.SidecarSetPodsUpdatedCondition, deckhandv1alpha1.SidecarSetInPlaceUpdatableCondition} {
		now := meta.FindStatusCondition(st.Conditions, t)
		before := meta.FindStatusCondition(s.Status.Conditions, t)
		if now == nil || (before != nil && before.Status == now.Status && before.Reason == now.Reason) {
			continue
		}
		if before == nil && now.Status == metav1.ConditionTrue {
			continue // nothing worth saying about a SidecarSet that starts healthy
		}
		typ := corev1.EventTypeNormal
		// A failed rollout has its one Warning Event, RolloutFailed; what
		// follows it is Normal.
		if now.Status == metav1.ConditionFalse && !slices.Contains([]string{ReasonRollingUpdate, ReasonUpdatePaused, ReasonNotUpdate,
			ReasonRolloutPaused, ReasonRollingBack, ReasonRolledBack}, now.Reason) {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(s, nil, typ, now.Reason, t, "%s", now.Message)
	}
}

func (r *Reconciler) recordMetrics(name string, st *deckhandv1alpha1.SidecarSetStatus) {
	for state, v := range map[string]int32{
		"matched": st.MatchedPods, "updated": st.UpdatedPods, "ready": st.ReadyPods, "updated_ready": st.UpdatedReadyPods,
		"not_injected": st.NotInjectedPods, "not_updatable": st.NotUpdatablePods,
		"resizing": st.ResizingPods, "evicting": st.EvictingPods, "disruption_blocked": st.DisruptionBlockedPods, "unmanaged": st.UnmanagedPods,
		"hot_upgrading": st.HotUpgradingPods,
	} {
		podsGauge.WithLabelValues(name, state).Set(float64(v))
	}
}
