package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Annotations and labels of the RestartSchedule kind.
const (
	// RestartScheduleAnnotation opts a Deployment, StatefulSet or DaemonSet into
	// scheduled restarts. Its value is either a cron schedule (the annotation is
	// then the source of truth for spec.schedule of the generated
	// RestartSchedule) or "true" (the generated RestartSchedule starts from the
	// manager's --default-restart-schedule and the user owns spec.schedule
	// afterwards).
	RestartScheduleAnnotation = "apps.deckhand.dev/restart-schedule"
	// RestartTimeZoneAnnotation optionally sets spec.timeZone of the
	// RestartSchedule generated from RestartScheduleAnnotation.
	RestartTimeZoneAnnotation = "apps.deckhand.dev/restart-timezone"
	// RestartScheduleGeneratedAnnotation is set by Deckhand on an annotated
	// workload once it has generated a RestartSchedule for it; its value is the
	// RestartScheduleAnnotation value the object was generated from. It lets
	// Deckhand tell "not generated yet" from "deleted on purpose by a user":
	// a deliberately deleted generated object is not re-created until the
	// annotation value changes.
	RestartScheduleGeneratedAnnotation = "apps.deckhand.dev/restart-schedule-generated"
	// RestartedAtAnnotation is the pod-template annotation a restart sets, to
	// the scheduled time of the run (RFC3339). Changing it rolls the workload
	// out with its own strategy; writing the same value twice changes nothing,
	// which makes a restart idempotent per scheduled slot.
	RestartedAtAnnotation = "apps.deckhand.dev/restarted-at"

	// RestartScheduleRunNowAnnotation on a RestartSchedule asks for one run
	// to start at once, outside the schedule. Its value is a token chosen by
	// the user (`kubectl deckhand restart-now` writes a timestamp): each new
	// token starts one run, a token already handled (status.lastRunNowToken)
	// does nothing. The run is the one a scheduled time starts (targets,
	// maxConcurrent, concurrencyPolicy, history, Events), its history
	// entries say trigger RunNow, and the restarted-at value it writes is
	// the run's start time. While suspended the token is refused and
	// recorded as handled. On a workload that carries
	// RestartScheduleAnnotation it is copied to the generated
	// RestartSchedule.
	RestartScheduleRunNowAnnotation = "apps.deckhand.dev/run-now"
	// RestartScheduleGeneratedLabel marks a RestartSchedule generated from a
	// workload's RestartScheduleAnnotation (value "true").
	RestartScheduleGeneratedLabel = "apps.deckhand.dev/generated"
)

// RestartConcurrencyPolicy says what a scheduled run does while the previous
// run is still rolling out.
// +kubebuilder:validation:Enum=Forbid;Replace
type RestartConcurrencyPolicy string

const (
	// RestartForbid skips a run (recorded as Skipped) while the previous run
	// is still rolling out.
	RestartForbid RestartConcurrencyPolicy = "Forbid"
	// RestartReplace abandons the previous run and restarts again.
	RestartReplace RestartConcurrencyPolicy = "Replace"
)

// RestartTrigger says what started a run.
// +kubebuilder:validation:Enum=Schedule;RunNow
type RestartTrigger string

const (
	// RestartTriggerSchedule: a scheduled time of spec.schedule.
	RestartTriggerSchedule RestartTrigger = "Schedule"
	// RestartTriggerRunNow: a new token in RestartScheduleRunNowAnnotation.
	RestartTriggerRunNow RestartTrigger = "RunNow"
)

// RestartResult is the outcome of one restart of one workload.
// +kubebuilder:validation:Enum=Succeeded;Failed;Skipped;Missed
type RestartResult string

const (
	// RestartSucceeded means the workload was restarted and its rollout completed.
	RestartSucceeded RestartResult = "Succeeded"
	// RestartFailed means the rollout exceeded its progress deadline or the
	// rolloutTimeout, the workload disappeared, or a newer run replaced it.
	RestartFailed RestartResult = "Failed"
	// RestartSkipped means the run did not restart the workload (paused
	// Deployment, previous run still rolling out, no matching workload, ...);
	// the message says why.
	RestartSkipped RestartResult = "Skipped"
	// RestartMissed means the scheduled time passed more than
	// startingDeadlineSeconds before the controller could start the run or,
	// for a workload of a run interrupted by suspend, before the run was
	// resumed.
	RestartMissed RestartResult = "Missed"
)

// Condition types of a RestartSchedule.
const (
	// RestartScheduleReadyCondition is True when the schedule is valid and its last
	// run did not fail. It is the ReadyCondition every kind sets.
	RestartScheduleReadyCondition = ReadyCondition
	// RestartScheduleSuspendedCondition is True while spec.suspend is set.
	RestartScheduleSuspendedCondition = "Suspended"
	// RestartScheduleInvalidScheduleCondition is True when spec.schedule or
	// spec.timeZone cannot be used; the message carries the parser's error.
	RestartScheduleInvalidScheduleCondition = "InvalidSchedule"
)

// RestartWorkloadReference names a workload in the RestartSchedule's namespace.
type RestartWorkloadReference struct {
	// kind of the workload.
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet
	// +required
	Kind string `json:"kind"`
	// name of the workload.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
}

// RestartTarget selects the workloads a RestartSchedule restarts: exactly one
// of targetRef or selector.
// +kubebuilder:validation:XValidation:rule="has(self.targetRef) != has(self.selector)",message="exactly one of targetRef or selector must be set"
type RestartTarget struct {
	// targetRef restarts one Deployment, StatefulSet or DaemonSet.
	// +optional
	TargetRef *RestartWorkloadReference `json:"targetRef,omitempty"`
	// selector restarts every Deployment, StatefulSet and DaemonSet of the
	// namespace whose labels match, at most maxConcurrent at a time.
	// An empty selector matches every workload of the namespace.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// RestartScheduleSpec is the desired schedule of rolling restarts.
type RestartScheduleSpec struct {
	// schedule is a standard 5-field cron expression ("0 3 * * *") or a
	// descriptor: @yearly, @monthly, @weekly, @daily, @midnight, @hourly or
	// "@every <duration>" ("@every 6h"). Evaluated in timeZone.
	// A schedule that never fires (such as "0 0 31 2 *") is rejected.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +required
	Schedule string `json:"schedule"`

	// timeZone is the IANA time zone name the schedule is evaluated in
	// ("Europe/Paris"). Unknown zones are rejected.
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MaxLength=64
	// +optional
	TimeZone string `json:"timeZone,omitempty"`

	// target selects the workloads to restart.
	// +required
	Target RestartTarget `json:"target"`

	// suspend stops every restart from starting while true: new runs, and
	// the workloads of a run in progress that have not started yet. Restarts
	// already started are still followed to completion. Scheduled times that
	// pass while suspended are not run after resuming. On resume, the
	// interrupted run continues only if its scheduled time is within
	// startingDeadlineSeconds; otherwise its workloads not yet restarted are
	// recorded as Missed.
	// +kubebuilder:default=false
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// startingDeadlineSeconds: a run that could not start within this many
	// seconds of its scheduled time (for example because the manager was
	// down) is recorded as Missed instead of running late; the same deadline
	// decides whether a run interrupted by suspend continues on resume. Unset
	// means a late run always starts (only the latest missed time runs).
	// +kubebuilder:validation:Minimum=1
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// concurrencyPolicy: Forbid (default) skips a run while the previous run
	// is still rolling out; Replace abandons the previous run and restarts
	// again.
	// +kubebuilder:default=Forbid
	// +optional
	ConcurrencyPolicy RestartConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// maxConcurrent is how many selected workloads restart at once; the next
	// one starts when a previous rollout completes.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxConcurrent int32 `json:"maxConcurrent,omitempty"`

	// rolloutTimeout is how long a restarted workload's rollout may take
	// before the restart is recorded as Failed.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be a positive duration"
	// +optional
	RolloutTimeout *metav1.Duration `json:"rolloutTimeout,omitempty"`

	// historyLimit is how many entries status.history keeps (newest first).
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	HistoryLimit int32 `json:"historyLimit,omitempty"`
}

// RestartActive is a workload whose restart is in progress.
type RestartActive struct {
	// kind of the workload.
	Kind string `json:"kind"`
	// name of the workload.
	Name string `json:"name"`
	// scheduledTime is the schedule slot this restart belongs to; for a
	// run-now run, the run's start time.
	ScheduledTime metav1.Time `json:"scheduledTime"`
	// trigger is what started the run: Schedule (also when unset) or RunNow.
	// +optional
	Trigger RestartTrigger `json:"trigger,omitempty"`
	// startTime is when the workload was patched.
	StartTime metav1.Time `json:"startTime"`
	// generation is the workload's metadata.generation after the restart
	// patch; the rollout is complete only once the workload's controller has
	// observed at least this generation.
	// +optional
	Generation int64 `json:"generation,omitempty"`
}

// RestartPending is a selected workload waiting for its turn in the current
// run (see maxConcurrent).
type RestartPending struct {
	// kind of the workload.
	Kind string `json:"kind"`
	// name of the workload.
	Name string `json:"name"`
	// scheduledTime is the schedule slot this restart belongs to; for a
	// run-now run, the run's start time.
	ScheduledTime metav1.Time `json:"scheduledTime"`
	// trigger is what started the run: Schedule (also when unset) or RunNow.
	// +optional
	Trigger RestartTrigger `json:"trigger,omitempty"`
}

// RestartRecord is one entry of the run history.
type RestartRecord struct {
	// scheduledTime is the schedule slot of the run; for a run-now run, the
	// run's start time (the restarted-at value it writes).
	ScheduledTime metav1.Time `json:"scheduledTime"`
	// trigger is what started the run: Schedule (also when unset) or RunNow.
	// +optional
	Trigger RestartTrigger `json:"trigger,omitempty"`
	// workload is "Kind/name" of the restarted workload, empty when the
	// entry is about the whole run (Missed, or Skipped before any workload
	// was chosen).
	// +optional
	Workload string `json:"workload,omitempty"`
	// startTime is when the workload was patched.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when the result was recorded.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// result of the run for this workload.
	Result RestartResult `json:"result"`
	// message explains the result.
	// +optional
	Message string `json:"message,omitempty"`
}

// RestartScheduleStatus is the observed state of a RestartSchedule.
type RestartScheduleStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// lastScheduleTime is the scheduled time of the latest run that started.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// lastSuccessfulTime is when a restart last completed successfully.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// nextScheduleTime is the next time a run is due (unset while suspended
	// or invalid).
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// handledThrough: every scheduled time at or before it has been handled
	// (run, skipped, missed, or earlier than the creation, the last schedule
	// edit or the last resume). Only later times can run, which is what keeps
	// a restarted controller from running a slot twice and an edit from
	// firing retroactively.
	// +optional
	HandledThrough *metav1.Time `json:"handledThrough,omitempty"`
	// lastRunNowToken is the last value of the apps.deckhand.dev/run-now
	// annotation handled (run, skipped or refused). It is written, with the
	// run's workloads in pending and their start time, before any workload is
	// restarted, so that neither a repeated token nor a restarted manager
	// runs it again.
	// +optional
	LastRunNowToken string `json:"lastRunNowToken,omitempty"`
	// observedSchedule is the "schedule|timeZone" handledThrough refers to; a
	// change means the schedule was edited.
	// +optional
	ObservedSchedule string `json:"observedSchedule,omitempty"`
	// active lists the workloads currently restarting.
	// +optional
	// +listType=atomic
	Active []RestartActive `json:"active,omitempty"`
	// pending lists selected workloads of the current run waiting for their
	// turn (maxConcurrent).
	// +optional
	// +listType=atomic
	Pending []RestartPending `json:"pending,omitempty"`
	// history of runs, newest first, at most spec.historyLimit entries.
	// +optional
	// +listType=atomic
	History []RestartRecord `json:"history,omitempty"`
	// conditions: Ready, Suspended, InvalidSchedule, and Stalled while the
	// schedule cannot be used.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RestartSchedule restarts Deployments, StatefulSets or DaemonSets on a cron
// schedule with their own rolling strategy, follows each rollout to
// completion and records every run.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rsched,categories=deckhand
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="TimeZone",type=string,JSONPath=`.spec.timeZone`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=`.status.nextScheduleTime`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the RestartSchedule has reached its spec: the status of its Ready condition"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="Why the RestartSchedule is or is not Ready"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RestartSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired schedule.
	// +required
	Spec RestartScheduleSpec `json:"spec"`
	// status is the observed state.
	// +optional
	Status RestartScheduleStatus `json:"status,omitempty"`
}

// RestartScheduleList is a list of RestartSchedules.
// +kubebuilder:object:root=true
type RestartScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the RestartSchedules.
	Items []RestartSchedule `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RestartSchedule{}, &RestartScheduleList{})
}
