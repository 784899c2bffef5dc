package podset

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/conditions"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
	"github.com/deckhand-dev/deckhand/internal/rolloutfailure"
	"github.com/deckhand-dev/deckhand/internal/statuspatch"
)

// Condition reasons.
const (
	ReasonMinimumReplicasAvailable   = "MinimumReplicasAvailable"
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	ReasonScaling                    = "Scaling"
	ReasonUpdating                   = "Updating"
	ReasonWaitingForOnDelete         = "WaitingForOnDelete"
	// ReasonComplete: every pod is on the current template, as far as the
	// strategy goes, and available (a Deployment's NewReplicaSetAvailable).
	ReasonComplete = "Complete"
	// ReasonProgressDeadlineExceeded: a rollout or scaling made no progress
	// for spec.progressDeadlineSeconds. Progressing is False with it, as for
	// a Deployment, and the PodSet is Stalled; the controller keeps trying.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonPaused: spec.paused holds back a rollout of the template that
	// has not reached every pod it would replace. Progressing is Unknown
	// with it, as for a paused Deployment (DeploymentPaused).
	ReasonPaused = "Paused"

	// Reasons of the summary conditions Ready, Reconciling and Stalled. A
	// Ready PodSet has the reason of its Progressing condition, Complete or
	// WaitingForOnDelete.

	// ReasonRolloutInProgress: pods are being created, deleted or replaced.
	ReasonRolloutInProgress = "RolloutInProgress"
	// ReasonPodsNotReady: the pods are there, on the current template as far
	// as the strategy goes, but some are not available yet.
	ReasonPodsNotReady = "PodsNotReady"
	// ReasonUpdatePaused: spec.paused holds back a pending rollout. Ready is
	// False (the pods are not all on the template) with neither Reconciling
	// (nothing moves until the user resumes) nor Stalled (nothing is
	// broken), the same verdict and reason as a paused SidecarSet rollout:
	// Argo CD reports Suspended, kstatus InProgress.
	ReasonUpdatePaused = "UpdatePaused"
	// ReasonReplicaFailure: pods could not be created or deleted (the
	// ReplicaFailure condition says why, e.g. a ResourceQuota).
	ReasonReplicaFailure = "ReplicaFailure"
)

// listedNames is the part of sorted pod names a status lists: nil for none,
// at most PodSetStatusMaxPodNames.
func listedNames(sorted []string) []string {
	if len(sorted) == 0 {
		return nil
	}
	return sorted[:min(len(sorted), deckhandv1alpha1.PodSetStatusMaxPodNames)]
}

// computeStatus derives the status from the owned pods. It also returns how
// long until the status may change with no event to say so: a Ready pod
// becoming available (minReadySeconds) or the progress deadline passing;
// 0 if never.
func computeStatus(s *scope, now time.Time) (deckhandv1alpha1.PodSetStatus, time.Duration) {
	ps := s.ps
	st := *ps.Status.DeepCopy()
	replicas := int32(1)
	if ps.Spec.Replicas != nil {
		replicas = *ps.Spec.Replicas
	}
	templateLabels := labels.SelectorFromValidatedSet(ps.Spec.Template.Labels)
	var ready, available, fullyLabeled, updated int32
	var requeue time.Duration
	names := make([]string, 0, len(s.pods))
	oldRevisions := map[string]int{}
	for _, p := range s.pods {
		names = append(names, p.Name)
		if templateLabels.Matches(labels.Set(p.Labels)) {
			fullyLabeled++
		}
		if podutil.IsPodReady(p) {
			ready++
		}
		avail, wait := isPodAvailable(p, ps.Spec.MinReadySeconds, now)
		if avail {
			available++
		} else if wait > 0 && (requeue == 0 || wait < requeue) {
			requeue = wait
		}
		if rev := p.Labels[deckhandv1alpha1.PodSetRevisionLabel]; rev == s.revision {
			updated++
		} else {
			oldRevisions[rev]++
		}
	}
	sort.Strings(names)
	st.Replicas = int32(len(s.pods))
	st.ReadyReplicas = ready
	st.AvailableReplicas = available
	st.FullyLabeledReplicas = fullyLabeled
	st.UpdatedReplicas = updated
	st.TerminatingReplicas = int32(len(s.terminating))
	st.PodNames = listedNames(names)
	st.Selector = s.selector.String()
	st.UpdateRevision = s.revision
	st.CollisionCount = s.collisionCount
	if s.synced {
		// Only a sync that could evict knows what waits on a budget.
		st.DisruptionBlockedPods = nil
		for name := range s.blocked {
			st.DisruptionBlockedPods = append(st.DisruptionBlockedPods, name)
		}
		sort.Strings(st.DisruptionBlockedPods)
		st.DisruptionBlockedPods = listedNames(st.DisruptionBlockedPods)
	}
	if len(oldRevisions) == 0 {
		st.CurrentRevision = s.revision
	} else if st.CurrentRevision == "" || st.CurrentRevision == s.revision {
		// Name the old revision most pods are still on.
		best, n := "", -1
		for rev, c := range oldRevisions {
			if c > n || (c == n && rev < best) {
				best, n = rev, c
			}
		}
		st.CurrentRevision = best
	}
	st.ObservedGeneration = ps.Generation

	// Conditions that change status now say so at the reconciler's time;
	// the others keep theirs.
	transition := metav1.NewTime(now)
	maxUnavailable := resolveStrategy(ps.Spec.UpdateStrategy, int(replicas)).maxUnavailable
	minAvailable := max(int(replicas)-maxUnavailable, 0)
	availableCond := metav1.Condition{
		Type: deckhandv1alpha1.PodSetAvailableCondition, Status: metav1.ConditionTrue, LastTransitionTime: transition, ObservedGeneration: ps.Generation,
		Reason:  ReasonMinimumReplicasAvailable,
		Message: fmt.Sprintf("%d of %d pods available (at least %d required)", available, replicas, minAvailable),
	}
	if int(available) < minAvailable {
		availableCond.Status, availableCond.Reason = metav1.ConditionFalse, ReasonMinimumReplicasUnavailable
	}
	meta.SetStatusCondition(&st.Conditions, availableCond)

	progressing := metav1.Condition{Type: deckhandv1alpha1.PodSetProgressingCondition, Status: metav1.ConditionTrue, LastTransitionTime: transition, ObservedGeneration: ps.Generation}
	onDelete := ps.Spec.UpdateStrategy.Type == deckhandv1alpha1.OnDeletePodSetStrategyType
	partition := int32(0)
	if ps.Spec.UpdateStrategy.Partition != nil {
		partition = *ps.Spec.UpdateStrategy.Partition
	}
	oldCount := st.Replicas - updated
	switch {
	case st.Replicas != replicas || st.TerminatingReplicas > 0:
		progressing.Reason = ReasonScaling
		progressing.Message = fmt.Sprintf("%d of %d pods, %d terminating", st.Replicas, replicas, st.TerminatingReplicas)
	case oldCount > 0 && onDelete:
		progressing.Reason = ReasonWaitingForOnDelete
		progressing.Message = fmt.Sprintf("%d pods on old revisions are replaced when deleted", oldCount)
	case oldCount > partition && ps.Spec.Paused:
		progressing.Status = metav1.ConditionUnknown
		progressing.Reason = ReasonPaused
		progressing.Message = fmt.Sprintf("rollout paused: %d of %d pods updated to revision %s", updated, replicas, s.revision)
	case oldCount > partition:
		progressing.Reason = ReasonUpdating
		progressing.Message = fmt.Sprintf("%d of %d pods updated to revision %s", updated, replicas, s.revision)
	case available < st.Replicas:
		progressing.Reason = ReasonUpdating
		progressing.Message = fmt.Sprintf("%d of %d pods available", available, st.Replicas)
	default:
		progressing.Reason = ReasonComplete
		progressing.Message = fmt.Sprintf("%d pods on revision %s are available", updated, s.revision)
	}
	if n := len(st.DisruptionBlockedPods); n > 0 && progressing.Reason == ReasonUpdating {
		progressing.Message += fmt.Sprintf("; %d pod(s) waiting on a PodDisruptionBudget", n)
	}
	inProgress := progressing.Reason == ReasonScaling || progressing.Reason == ReasonUpdating
	timedOut, untilDeadline := trackProgress(&ps.Status, &st, ps.Generation, replicas, inProgress,
		progressDeadline(ps), now)
	if timedOut {
		progressing.Status = metav1.ConditionFalse
		progressing.Message = fmt.Sprintf("no progress for more than %ds: %s", int64(progressDeadline(ps)/time.Second), progressing.Message)
		progressing.Reason = ReasonProgressDeadlineExceeded
	}
	if untilDeadline > 0 && (requeue == 0 || untilDeadline < requeue) {
		requeue = untilDeadline
	}
	rolloutfailure.Revisions{Stable: &st.StableRevision, Failed: &st.FailedRevision}.
		Settle(s.revision, progressing.Reason == ReasonComplete && updated == replicas, timedOut)
	if ps.Status.FailedRevision != "" && ps.Status.FailedRevision == st.FailedRevision {
		// The failed rollout's clock stopped when it failed: what a Pause
		// (the surge it scales away) or a Rollback does next is not its
		// progress.
		st.LastProgressTime = ps.Status.LastProgressTime
	}
	if resp := respondToFailure(ps, st.FailedRevision, st.StableRevision, s.revision, s.revisions); resp != nil {
		// Progress made by a rollback, or by a spec change other than the
		// template, does not undo the failure: it stays until the template
		// changes.
		progressing.Status = metav1.ConditionFalse
		progressing.Reason = ReasonProgressDeadlineExceeded
		progressing.Message = fmt.Sprintf("rollout of revision %s failed: %d of %d pods updated", s.revision, updated, replicas)
		meta.SetStatusCondition(&st.Conditions, rolloutFailedCondition(s, resp, replicas, progressDeadline(ps), now))
	} else {
		meta.RemoveStatusCondition(&st.Conditions, deckhandv1alpha1.RolloutFailedCondition)
	}
	meta.SetStatusCondition(&st.Conditions, progressing)

	if s.failure != nil {
		failure := *s.failure
		failure.LastTransitionTime = transition
		meta.SetStatusCondition(&st.Conditions, failure)
	} else if s.synced {
		// A sync that acted without failing clears an earlier failure.
		meta.RemoveStatusCondition(&st.Conditions, deckhandv1alpha1.PodSetReplicaFailureCondition)
	}
	replacing := !onDelete && !ps.Spec.Paused && oldCount > partition
	conditions.Set(&st.Conditions, ps.Generation, now, summarize(&st, replicas, progressing, replacing))
	return st, requeue
}

// defaultProgressDeadline applies when spec.progressDeadlineSeconds is unset
// (the CRD defaults it; objects stored before the field existed may lack
// it), as for a Deployment.
const defaultProgressDeadline = 600 * time.Second

func progressDeadline(ps *deckhandv1alpha1.PodSet) time.Duration {
	if d := ps.Spec.ProgressDeadlineSeconds; d != nil && *d > 0 {
		return time.Duration(*d) * time.Second
	}
	return defaultProgressDeadline
}

// trackProgress sets next.LastProgressTime and tells whether the rollout or
// scaling under way (inProgress) has gone longer than deadline without
// progress, and otherwise how long until it would have. It is pure: time
// comes in as now.
//
// Progress is what a Deployment counts (DeploymentProgressing): more pods
// updated, ready or available, fewer pods on old revisions, and, for
// scaling, fewer terminating pods or a replica count nearer spec.replicas;
// also any new generation or update revision, and the start of a rollout
// (no LastProgressTime yet). LastProgressTime is cleared when nothing is in
// progress: when complete, waiting for OnDelete, or paused, so that a paused
// PodSet never times out and its deadline starts afresh on resume, as a
// Deployment's does.
func trackProgress(prev, next *deckhandv1alpha1.PodSetStatus, generation int64, replicas int32, inProgress bool,
	deadline time.Duration, now time.Time) (timedOut bool, untilDeadline time.Duration) {
	if !inProgress {
		next.LastProgressTime = nil
		return false, 0
	}
	oldPods := func(st *deckhandv1alpha1.PodSetStatus) int32 { return st.Replicas - st.UpdatedReplicas }
	dist := func(n int32) int32 {
		if n > replicas {
			return n - replicas
		}
		return replicas - n
	}
	progressed := prev.LastProgressTime == nil ||
		prev.ObservedGeneration != generation ||
		prev.UpdateRevision != next.UpdateRevision ||
		next.UpdatedReplicas > prev.UpdatedReplicas ||
		next.ReadyReplicas > prev.ReadyReplicas ||
		next.AvailableReplicas > prev.AvailableReplicas ||
		oldPods(next) < oldPods(prev) ||
		next.TerminatingReplicas < prev.TerminatingReplicas ||
		dist(next.Replicas) < dist(prev.Replicas)
	if progressed {
		t := metav1.NewTime(now)
		next.LastProgressTime = &t
	} else {
		next.LastProgressTime = prev.LastProgressTime
	}
	left := next.LastProgressTime.Add(deadline).Sub(now)
	if left <= 0 {
		return true, 0
	}
	return false, left
}

// summarize reaches the verdict of the summary conditions from the status
// computed for the current generation. Pods that the strategy leaves on an
// old revision by design (below the partition, or waiting for deletion under
// OnDelete) do not keep the PodSet from being Ready, as kstatus and Argo CD
// treat a StatefulSet.
//
// replacing is true while pods on old revisions remain that the strategy
// replaces itself and the PodSet is not paused. A paused rollout is Waiting:
// not Ready, but not Reconciling either, because nothing moves until the
// user resumes it; scaling while paused is Reconciling as ever.
func summarize(st *deckhandv1alpha1.PodSetStatus, replicas int32, progressing metav1.Condition, replacing bool) conditions.Summary {
	if c := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.PodSetReplicaFailureCondition); c != nil && c.Status == metav1.ConditionTrue {
		return conditions.Summary{State: conditions.Stalled, Reason: ReasonReplicaFailure, Message: c.Reason + ": " + c.Message}
	}
	switch {
	case progressing.Reason == ReasonProgressDeadlineExceeded:
		return conditions.Summary{State: conditions.Stalled, Reason: ReasonProgressDeadlineExceeded, Message: progressing.Message}
	case progressing.Reason == ReasonScaling || replacing:
		return conditions.Summary{State: conditions.Reconciling, Reason: ReasonRolloutInProgress, Message: progressing.Message}
	case progressing.Reason == ReasonUpdating:
		return conditions.Summary{State: conditions.Reconciling, Reason: ReasonPodsNotReady, Message: progressing.Message}
	case progressing.Reason == ReasonPaused:
		return conditions.Summary{State: conditions.Waiting, Reason: ReasonUpdatePaused, Message: progressing.Message}
	case st.AvailableReplicas < replicas:
		return conditions.Summary{State: conditions.Waiting, Reason: ReasonPodsNotReady,
			Message: fmt.Sprintf("%d of %d pods available", st.AvailableReplicas, replicas)}
	}
	return conditions.Summary{State: conditions.Ready, Reason: progressing.Reason, Message: progressing.Message}
}

// updateStatus writes the status when it changed, and requeues for pods
// that become available after minReadySeconds.
func (r *Reconciler) updateStatus(ctx context.Context, s *scope) (ctrl.Result, error) {
	st, wait := computeStatus(s, r.Clock.Now())
	var res ctrl.Result
	if wait > 0 {
		res.RequeueAfter = wait + time.Second
	}
	wasFailed := s.ps.Status.FailedRevision
	written, err := statuspatch.Writer{Client: r.Client, FieldManager: deckhandv1alpha1.FieldManager}.Status(ctx, s.ps, &st)
	if err != nil {
		return res, err
	}
	// The Event follows the write that records the failure, so that it is
	// recorded once, by whichever sync persisted it.
	if failed := s.ps.Status.FailedRevision; failed != "" && failed == st.FailedRevision && failed != wasFailed {
		resp := respondToFailure(s.ps, failed, st.StableRevision, s.revision, s.revisions)
		r.Recorder.Eventf(s.ps, nil, corev1.EventTypeWarning, ReasonRolloutFailed, "Rollout", "%s", failureNote(s.ps, failed, resp))
	}
	return reconcileutil.LowestNonZero(res, written), nil
}
