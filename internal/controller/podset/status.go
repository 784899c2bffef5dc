package podset

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/conditions"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// Condition reasons.
const (
	ReasonMinimumReplicasAvailable   = "MinimumReplicasAvailable"
	ReasonMinimumReplicasUnavailable = "MinimumReplicasUnavailable"
	ReasonScaling                    = "Scaling"
	ReasonUpdating                   = "Updating"
	ReasonWaitingForOnDelete         = "WaitingForOnDelete"
	ReasonComplete                   = "Complete"
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

// computeStatus derives the status from the owned pods. It also returns how
// long until a Ready pod becomes available (minReadySeconds), 0 if none.
func computeStatus(s *scope, now time.Time) (deckhandv1alpha1.PodSetStatus, time.Duration) {
	ps := s.ps
	st := *ps.Status.DeepCopy()
	replicas := int32(1)
	if ps.Spec.Replicas != nil {
		replicas = *ps.Spec.Replicas
	}
	templateLabels := labels.Set(ps.Spec.Template.Labels)
	var ready, available, fullyLabeled, updated int32
	var requeue time.Duration
	names := make([]string, 0, len(s.pods))
	oldRevisions := map[string]int{}
	for _, p := range s.pods {
		names = append(names, p.Name)
		if templateLabels.AsSelector().Matches(labels.Set(p.Labels)) {
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
	st.PodNames = names
	if len(names) == 0 {
		st.PodNames = nil
	}
	st.Selector = s.selector.String()
	st.UpdateRevision = s.revision
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
	if int(available) >= minAvailable {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: deckhandv1alpha1.PodSetAvailableCondition, Status: metav1.ConditionTrue, LastTransitionTime: transition,
			Reason:  ReasonMinimumReplicasAvailable,
			Message: fmt.Sprintf("%d of %d pods available (at least %d required)", available, replicas, minAvailable),
		})
	} else {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: deckhandv1alpha1.PodSetAvailableCondition, Status: metav1.ConditionFalse, LastTransitionTime: transition,
			Reason:  ReasonMinimumReplicasUnavailable,
			Message: fmt.Sprintf("%d of %d pods available (at least %d required)", available, replicas, minAvailable),
		})
	}

	progressing := metav1.Condition{Type: deckhandv1alpha1.PodSetProgressingCondition, Status: metav1.ConditionTrue, LastTransitionTime: transition}
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
	if equality.Semantic.DeepEqual(st, s.ps.Status) {
		return res, nil
	}
	orig := s.ps.DeepCopy()
	s.ps.Status = st
	if err := r.Client.Status().Patch(ctx, s.ps, client.MergeFrom(orig), client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
		return res, fmt.Errorf("patching status: %w", err)
	}
	return res, nil
}
