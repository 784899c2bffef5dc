// Package rolloutfailure is the one vocabulary of a failed rollout that
// PodSet and SidecarSet share: when a rollout has failed, what is recorded
// of it in the status, and the reasons of its condition and Event.
package rolloutfailure

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// Reasons of a failed rollout: the Warning Event recorded once when it
// fails, and the RolloutFailed condition that stays until the revision
// changes.
const (
	// ReasonRolloutFailed: the rollout of the latest revision made no
	// progress for its progress deadline (Warning Event).
	ReasonRolloutFailed = "RolloutFailed"
	// ReasonRolloutPaused: onFailure Pause (or Rollback with no stable
	// revision to return to) holds every pod where it is.
	ReasonRolloutPaused = "RolloutPaused"
	// ReasonRollingBack: onFailure Rollback is returning the pods to the
	// stable revision.
	ReasonRollingBack = "RollingBack"
	// ReasonRolledBack: onFailure Rollback has returned every pod to the
	// stable revision.
	ReasonRolledBack = "RolledBack"
)

// Revisions are the two revisions a kind's status records of its rollouts.
type Revisions struct {
	// Stable is the last revision whose rollout completed with every pod
	// on it and ready.
	Stable *string
	// Failed is the latest revision when its rollout failed.
	Failed *string
}

// Settle records what a sync learned of the rollout of revision: one that
// completed makes it the stable revision; one that timed out while pods
// were to leave the stable revision has failed. The failure lives in the
// status, not in memory, so that whatever replica runs the next sync,
// after whatever crash, acts on it the same way; it ends only when the
// revision changes (a new revision starts a new rollout) or the revision's
// pods complete it after all.
func (r Revisions) Settle(revision string, complete, timedOut bool) {
	if *r.Failed != revision {
		*r.Failed = ""
	}
	switch {
	case complete:
		*r.Stable = revision
		*r.Failed = ""
	case timedOut && *r.Stable != "" && *r.Stable != revision:
		*r.Failed = revision
	}
}

// Condition is the RolloutFailed condition, True with reason and message,
// at now for generation.
func Condition(reason, message string, generation int64, now metav1.Time) metav1.Condition {
	return metav1.Condition{Type: deckhandv1alpha1.RolloutFailedCondition, Status: metav1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: generation, LastTransitionTime: now}
}
