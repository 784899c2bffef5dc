package sidecarset

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/conditions"
	sidecarpolicyctrl "github.com/deckhand-dev/deckhand/internal/controller/sidecarpolicy"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/rolloutfailure"
)

// Condition reasons, stable for users' automation; a change of a
// condition is also announced by an Event with its reason.
const (
	ReasonContainerNameConflict = "ContainerNameConflict"
	ReasonPodsNotInjected       = "PodsNotInjected"
	ReasonAllPodsInjected       = "AllPodsInjected"
	ReasonNonImageChanges       = "NonImageChanges"
	ReasonImageOnlyChanges      = "ImageOnlyChanges"
	ReasonAllPodsUpdated        = "AllPodsUpdated"
	ReasonNotUpdate             = "NotUpdate"
	ReasonUpdatePaused          = "UpdatePaused"
	ReasonUpdateHeld            = "UpdateHeld"
	ReasonRollingUpdate         = "RollingUpdate"
	// ReasonPodsNotRecreatable: pods need recreating (recreate: Evict) but
	// have no controller owner that would recreate them.
	ReasonPodsNotRecreatable = "PodsNotRecreatable"

	// Reasons of the summary conditions Ready, Reconciling and Stalled. A
	// Ready SidecarSet has the reason of its PodsUpdated condition
	// (AllPodsUpdated, NotUpdate or UpdateHeld); a stalled one the reason of
	// the condition that blocks it (ContainerNameConflict, PodsNotInjected,
	// NonImageChanges); a paused rollout is not Ready, with UpdatePaused.

	// ReasonRolloutInProgress: injected pods are being updated in place.
	ReasonRolloutInProgress = "RolloutInProgress"
	// ReasonRecreatingPods: pods that missed injection are being evicted
	// for their controllers to recreate (recreate: Evict).
	ReasonRecreatingPods = "RecreatingPods"
	// ReasonPodsNotReady: every pod is as far as the strategy takes it, but
	// some are not Ready.
	ReasonPodsNotReady = "PodsNotReady"

	// Reasons of a failed rollout (rolloutfailure): the Warning Event, and
	// RolloutFailed and PodsUpdated while the failure holds the rollout;
	// Stalled says ProgressDeadlineExceeded, as for a PodSet.
	ReasonRolloutFailed            = rolloutfailure.ReasonRolloutFailed
	ReasonRolloutPaused            = rolloutfailure.ReasonRolloutPaused
	ReasonRollingBack              = rolloutfailure.ReasonRollingBack
	ReasonRolledBack               = rolloutfailure.ReasonRolledBack
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
)

// computeStatus counts the pods and sets the conditions.
func (r *Reconciler) computeStatus(_ context.Context, sc *scope) (ctrl.Result, error) {
	s := sc.set
	st := deckhandv1alpha1.SidecarSetStatus{
		ObservedGeneration: s.Status.ObservedGeneration,
		LatestRevision:     sc.compiled.Hash,
		Conditions:         append([]metav1.Condition(nil), s.Status.Conditions...),
	}
	var clashes int
	var clash *podState // the first clashing pod by namespace and name, for a stable message
	evict := s.Spec.UpdateStrategy.Recreate == deckhandv1alpha1.RecreateEvict
	st.EvictingPods = int32(sc.observed.evicting)
	st.DisruptionBlockedPods = int32(sc.observed.blocked)
	for _, p := range sc.pods {
		if evict && p.inScope && p.needsRecreate() && !p.recreatedByRollout(evict) {
			st.UnmanagedPods++
		}
		if !p.injected() {
			st.NotInjectedPods++
			if p.stage == stageNameClash {
				clashes++
				if clash == nil || podKey(p.pod) < podKey(clash.pod) {
					clash = p
				}
			}
			continue
		}
		st.MatchedPods++
		if p.ready {
			st.ReadyPods++
		}
		if p.stage == stageUpdated && !p.pending {
			st.UpdatedPods++
			if p.ready {
				st.UpdatedReadyPods++
			}
		}
		if p.notUpdatable() {
			st.NotUpdatablePods++
		}
		if p.resizing() {
			st.ResizingPods++
		}
		if p.hotUpgrading {
			st.HotUpgradingPods++
		}
	}
	recreateNote := ""
	if evict {
		recreateNote = "; updateStrategy.recreate is Evict, so they are evicted for their controllers to recreate them"
		if st.UnmanagedPods > 0 {
			recreateNote += fmt.Sprintf(", except %d pod(s) without a controller owner that would recreate them (recreate those by hand)", st.UnmanagedPods)
		}
	}
	gen := s.Generation
	set := func(c metav1.Condition) {
		c.LastTransitionTime = metav1.NewTime(sc.now) // kept unless the status changes
		meta.SetStatusCondition(&st.Conditions, c)
	}
	switch {
	case clashes > 0:
		msg := fmt.Sprintf("%d pod(s) match the selector but do not carry this SidecarSet's sidecars; %d of them already had a container named like one of its sidecars when they were created (pod %s has its own container %q), and a pod's own container wins: rename the sidecar or the pod's container, then recreate the pods",
			st.NotInjectedPods, clashes, podKey(clash.pod), clash.clash)
		if others := int(st.NotInjectedPods) - clashes; others > 0 {
			msg += fmt.Sprintf("; the other %d were created while the pod webhook was unavailable, while injection was paused, or before the SidecarSet existed: recreate them to inject them", others)
		}
		set(metav1.Condition{
			Type: deckhandv1alpha1.SidecarSetPodsInjectedCondition, Status: metav1.ConditionFalse, Reason: ReasonContainerNameConflict, ObservedGeneration: gen,
			Message: msg,
		})
	case st.NotInjectedPods > 0:
		set(metav1.Condition{
			Type: deckhandv1alpha1.SidecarSetPodsInjectedCondition, Status: metav1.ConditionFalse, Reason: ReasonPodsNotInjected, ObservedGeneration: gen,
			Message: fmt.Sprintf("%d pod(s) match the selector but do not carry this SidecarSet's sidecars (created while the pod webhook was unavailable, while injection was paused, or before the SidecarSet existed); recreating them injects them", st.NotInjectedPods) + recreateNote,
		})
	default:
		set(metav1.Condition{
			Type: deckhandv1alpha1.SidecarSetPodsInjectedCondition, Status: metav1.ConditionTrue, Reason: ReasonAllPodsInjected, ObservedGeneration: gen,
			Message: "every pod the SidecarSet selects carries its sidecars",
		})
	}
	if st.NotUpdatablePods > 0 {
		set(metav1.Condition{
			Type: deckhandv1alpha1.SidecarSetInPlaceUpdatableCondition, Status: metav1.ConditionFalse, Reason: ReasonNonImageChanges, ObservedGeneration: gen,
			Message: fmt.Sprintf("%d pod(s) carry a revision that differs from the latest in more than images and CPU or memory resources, or could not be resized in place; only images and resources are updated in place, so these pods get the change only when they are recreated", st.NotUpdatablePods) + recreateNote,
		})
	} else {
		set(metav1.Condition{
			Type: deckhandv1alpha1.SidecarSetInPlaceUpdatableCondition, Status: metav1.ConditionTrue, Reason: ReasonImageOnlyChanges, ObservedGeneration: gen,
			Message: "every injected pod can reach the latest revision in place",
		})
	}
	us := s.Spec.UpdateStrategy
	cond := metav1.Condition{Type: deckhandv1alpha1.SidecarSetPodsUpdatedCondition, ObservedGeneration: gen, Status: metav1.ConditionFalse}
	progress := fmt.Sprintf("%d of %d pod(s) updated", st.UpdatedPods, st.MatchedPods)
	if st.ResizingPods > 0 {
		progress += fmt.Sprintf(", %d resizing in place", st.ResizingPods)
	}
	if st.EvictingPods > 0 {
		progress += fmt.Sprintf(", %d evicted and not yet replaced", st.EvictingPods)
	}
	if st.DisruptionBlockedPods > 0 {
		progress += fmt.Sprintf(", %d waiting on a PodDisruptionBudget", st.DisruptionBlockedPods)
	}
	held := st.UpdatedPods != st.MatchedPods && rolloutHeld(sc, int(st.MatchedPods))
	inProgress := st.UpdatedPods != st.MatchedPods && us.Type != deckhandv1alpha1.NotUpdateSidecarSetStrategy && !us.Paused && !held
	deadline := progressDeadline(s)
	untilDeadline := trackRollout(&s.Status, &st, inProgress, deadline, sc.now)
	switch {
	case st.UpdatedPods == st.MatchedPods:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, ReasonAllPodsUpdated, "every injected pod runs the latest revision"
	case us.Type == deckhandv1alpha1.NotUpdateSidecarSetStrategy:
		cond.Reason, cond.Message = ReasonNotUpdate, progress+"; updateStrategy.type is NotUpdate, so running pods keep their revision"
	case us.Paused:
		cond.Reason, cond.Message = ReasonUpdatePaused, progress+"; the rollout is paused (updateStrategy.paused)"
	case held:
		cond.Reason, cond.Message = ReasonUpdateHeld, progress+"; the remaining pods are held back by updateStrategy.partition or updateStrategy.selector, or need recreating (see InPlaceUpdatable)"
	case st.FailedRevision == st.LatestRevision:
		reason, msg := r.failureOutcome(sc, &st, deadline)
		cond.Reason, cond.Message = reason, progress+"; "+msg
	default:
		cond.Reason, cond.Message = ReasonRollingUpdate, progress
	}
	set(cond)
	if st.FailedRevision != "" && st.FailedRevision == st.LatestRevision {
		reason, msg := r.failureOutcome(sc, &st, deadline)
		meta.SetStatusCondition(&st.Conditions, rolloutfailure.Condition(reason, msg, gen, metav1.NewTime(sc.now)))
		if s.Status.FailedRevision != st.FailedRevision {
			// Status writes do not start reconciles: the next one acts on
			// the failure this one records.
			untilDeadline = time.Second
		}
	} else {
		meta.RemoveStatusCondition(&st.Conditions, deckhandv1alpha1.RolloutFailedCondition)
	}
	sum := summarize(&st, blockedPods(sc, int(st.MatchedPods)), evict)
	if r.Lister.Modes().Effective(s) == deckhandv1alpha1.PolicyInjection {
		sum = awaitPolicy(&st, gen, sum)
	}
	conditions.Set(&st.Conditions, gen, sc.now, sum)
	sc.status = st
	if untilDeadline > 0 {
		// Status writes do not start reconciles: the deadline passing needs
		// one of its own.
		return ctrl.Result{RequeueAfter: untilDeadline + time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// summarize reaches the verdict of the summary conditions from the other
// conditions and the counts. A SidecarSet is Ready when every pod it selects
// carries its sidecars, is as far along the rollout as the strategy takes it
// (every pod at the latest revision; under NotUpdate, whatever revision it
// was created with; pods held back by partition or selector stay where they
// are) and is Ready. blocked is the number of pods the rollout must update
// but cannot in place.
//
// Under recreate: Evict (evict), pods that missed injection or that only a
// recreation updates are the rollout's work, not a stall, unless they have
// no controller to recreate them.
func summarize(st *deckhandv1alpha1.SidecarSetStatus, blocked int, evict bool) conditions.Summary {
	injected := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.SidecarSetPodsInjectedCondition)
	updated := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
	policy := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition)
	switch {
	case policy != nil && policy.Status == metav1.ConditionFalse && policy.Reason == sidecarpolicyctrl.ReasonPolicyNotYetInEffect:
		// Written but not loaded by the API server yet: a matter of
		// moments, and the policy controller looks again.
		return conditions.Summary{State: conditions.Reconciling, Reason: policy.Reason, Message: policy.Message}
	case policy != nil && policy.Status == metav1.ConditionFalse && policy.Reason != sidecarpolicyctrl.ReasonPolicyAPIUnavailable:
		// Policy mode without a policy for the current spec: new pods miss
		// their sidecars (or get an old revision) until the spec or the
		// conflicting object changes. Where the API is not served, the
		// webhook injects instead, and that is no stall.
		return conditions.Summary{State: conditions.Stalled, Reason: policy.Reason, Message: policy.Message}
	case evict && st.UnmanagedPods > 0 && (injected.Status == metav1.ConditionFalse && injected.Reason == ReasonPodsNotInjected || blocked > 0):
		return conditions.Summary{State: conditions.Stalled, Reason: ReasonPodsNotRecreatable,
			Message: fmt.Sprintf("%d pod(s) need recreating to get the latest revision but have no controller owner that would recreate them: recreate them by hand", st.UnmanagedPods)}
	case evict && injected.Status == metav1.ConditionFalse && injected.Reason == ReasonPodsNotInjected && updated.Reason != ReasonUpdatePaused:
		return conditions.Summary{State: conditions.Reconciling, Reason: ReasonRecreatingPods, Message: injected.Message}
	case injected.Status == metav1.ConditionFalse:
		// Only recreating the pods injects them: nothing Deckhand can do.
		return conditions.Summary{State: conditions.Stalled, Reason: injected.Reason, Message: injected.Message}
	case updated.Reason == ReasonRolloutPaused || updated.Reason == ReasonRollingBack || updated.Reason == ReasonRolledBack:
		return conditions.Summary{State: conditions.Stalled, Reason: ReasonProgressDeadlineExceeded, Message: updated.Message}
	case updated.Reason == ReasonRollingUpdate:
		return conditions.Summary{State: conditions.Reconciling, Reason: ReasonRolloutInProgress, Message: updated.Message}
	case updated.Reason == ReasonUpdatePaused:
		return conditions.Summary{State: conditions.Waiting, Reason: ReasonUpdatePaused, Message: updated.Message}
	case updated.Reason == ReasonUpdateHeld && blocked > 0:
		return conditions.Summary{State: conditions.Stalled, Reason: ReasonNonImageChanges,
			Message: fmt.Sprintf("%d pod(s) the rollout must update carry a revision that differs from the latest in more than images; only images are updated in place: recreate them", blocked)}
	case st.EvictingPods > 0 && updated.Reason != ReasonUpdatePaused:
		return conditions.Summary{State: conditions.Reconciling, Reason: ReasonRecreatingPods,
			Message: fmt.Sprintf("%d evicted pod(s) not yet replaced by their controllers; %s", st.EvictingPods, updated.Message)}
	case st.ReadyPods < st.MatchedPods:
		return conditions.Summary{State: conditions.Waiting, Reason: ReasonPodsNotReady,
			Message: fmt.Sprintf("%d of %d pod(s) Ready; %s", st.ReadyPods, st.MatchedPods, updated.Message)}
	}
	return conditions.Summary{State: conditions.Ready, Reason: updated.Reason,
		Message: fmt.Sprintf("%d pod(s) carry the sidecars and are Ready; %s", st.MatchedPods, updated.Message)}
}

// ReasonPolicyPending: Policy mode, and the policy controller has not yet
// reported on the policy of the current generation.
const ReasonPolicyPending = "PolicyPending"

// awaitPolicy keeps a Policy-mode SidecarSet from being Ready before its
// InjectionPolicyReady condition speaks of generation gen: until then
// nothing says that a pod admitted now gets the current sidecars.
func awaitPolicy(st *deckhandv1alpha1.SidecarSetStatus, gen int64, sum conditions.Summary) conditions.Summary {
	policy := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition)
	if sum.State != conditions.Ready || policy != nil && policy.ObservedGeneration == gen {
		return sum
	}
	return conditions.Summary{State: conditions.Reconciling, Reason: ReasonPolicyPending,
		Message: "waiting for the policy controller to write and check the injection policy of the current spec (InjectionPolicyReady)"}
}

// blockedPods counts the injected pods the rollout must update but cannot
// in place: selected by updateStrategy.selector, behind the latest revision
// in more than images, and not kept back by the partition anyway.
//
// Under recreate: Evict, only the pods without a controller owner that
// would recreate them are blocked.
func blockedPods(sc *scope, matched int) int {
	evict := sc.set.Spec.UpdateStrategy.Recreate == deckhandv1alpha1.RecreateEvict
	behind, blocked := 0, 0
	for _, p := range sc.pods {
		if !p.injected() || p.pending {
			continue
		}
		stuck := p.inScope && !p.recreatedByRollout(evict)
		switch p.stage {
		case stageResizeFailed:
			// A failed resize leaves a pod at the latest revision that only
			// recreating it can finish.
			if stuck {
				blocked++
			}
		case stageSpecBehind:
			behind++
			if stuck {
				blocked++
			}
		case stageImagesBehind, stageResourcesBehind:
			behind++
		}
	}
	if behind <= scaled(sc.set.Spec.UpdateStrategy.Partition, matched, 0) {
		return 0
	}
	return blocked
}

// rolloutHeld reports whether every injected pod the strategy lets the
// controller update is updated, so the rollout stands still by design.
func rolloutHeld(sc *scope, matched int) bool {
	partition := scaled(sc.set.Spec.UpdateStrategy.Partition, matched, 0)
	evict := sc.set.Spec.UpdateStrategy.Recreate == deckhandv1alpha1.RecreateEvict
	atLatest, movable := 0, 0
	for _, p := range sc.pods {
		if !p.injected() {
			continue
		}
		if p.atLatest() || p.pending {
			atLatest++
			if p.stage == stageResizeFailed && !p.pending && !p.recreatedByRollout(evict) {
				continue // stuck: only recreating it finishes it
			}
			if p.stage != stageUpdated || p.pending || p.gateClosed || inplacegate.ReadyAwaited(p.pod) {
				// An update is in flight: not made yet, not seen yet, or
				// made and its pod not yet back in its endpoints.
				return false
			}
			continue
		}
		if p.inScope && (!p.needsRecreate() || p.recreatedByRollout(evict)) {
			movable++
		}
	}
	return movable == 0 || matched-atLatest <= partition
}
