package v1alpha1

// RolloutFailurePolicy says what a PodSet or SidecarSet does when a rollout
// fails: its updated pods made no progress for the progress deadline.
// +kubebuilder:validation:Enum=Pause;Rollback
type RolloutFailurePolicy string

const (
	// PauseRolloutFailurePolicy stops the rollout where it is: no further
	// pod is updated, as if it were paused, without changing the spec.
	PauseRolloutFailurePolicy RolloutFailurePolicy = "Pause"
	// RollbackRolloutFailurePolicy returns the pods to status.stableRevision,
	// the last revision whose pods were all ready, without changing the spec.
	RollbackRolloutFailurePolicy RolloutFailurePolicy = "Rollback"
)

// RolloutFailedCondition is the condition type both PodSet and SidecarSet
// set while the rollout of the current revision has failed: True with
// reason RolloutPaused (onFailure Pause, or Rollback with no stable revision
// to return to), RollingBack or RolledBack (onFailure Rollback). It is
// removed when a new revision starts a new rollout.
const RolloutFailedCondition = "RolloutFailed"
