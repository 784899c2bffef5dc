package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
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
	// recorded as handled. spec.windows and spec.blackoutDates apply as to
	// a scheduled run (outsideWindowPolicy included), unless
	// RestartScheduleRunNowIgnoreWindowsAnnotation carries the same token. On a workload that carries
	// RestartScheduleAnnotation it is copied to the generated
	// RestartSchedule.
	RestartScheduleRunNowAnnotation = "apps.deckhand.dev/run-now"
	// RestartQueryCredentialsLabel, set to "true" on a Secret, lets a query
	// trigger of a RestartSchedule in its namespace send the Secret's key to
	// its endpoint as a bearer token. Without it the query fails: whoever may
	// create a RestartSchedule could otherwise send any Secret of the
	// namespace to a URL of their choosing, through Deckhand's permission to
	// read it. Labelling the Secret takes the right to change it.
	RestartQueryCredentialsLabel = "apps.deckhand.dev/query-credentials"
	// RestartScheduleRunNowIgnoreWindowsAnnotation lets one run-now request
	// start outside spec.windows and on spec.blackoutDates. Its value must
	// be the very token of RestartScheduleRunNowAnnotation it applies to, so
	// that an override left behind never lets a later request through. On
	// a workload that carries RestartScheduleAnnotation it is copied to the
	// generated RestartSchedule with the token.
	RestartScheduleRunNowIgnoreWindowsAnnotation = "apps.deckhand.dev/run-now-ignore-windows"
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

// RestartOutsideWindowPolicy says what happens to a run that is due while
// restarts may not start (outside spec.windows, or on a blackout date).
// +kubebuilder:validation:Enum=Skip;Defer
type RestartOutsideWindowPolicy string

const (
	// RestartOutsideWindowSkip records the run (or the workload of a run
	// whose turn comes after the window closed) as Skipped.
	RestartOutsideWindowSkip RestartOutsideWindowPolicy = "Skip"
	// RestartOutsideWindowDefer starts the run at the next moment restarts
	// may start (the next window opening, the end of a blackout), provided
	// that moment is within startingDeadlineSeconds of the scheduled time;
	// otherwise the run is recorded as Skipped. A later scheduled time that
	// is due by then supersedes it (only the latest due time runs).
	RestartOutsideWindowDefer RestartOutsideWindowPolicy = "Defer"
)

// RestartFailurePolicy says what a run does when a restart fails.
// +kubebuilder:validation:Enum=Continue;Stop
type RestartFailurePolicy string

const (
	// RestartFailureContinue goes on with the run's other workloads.
	RestartFailureContinue RestartFailurePolicy = "Continue"
	// RestartFailureStop halts the run: its workloads not yet started are
	// recorded as Skipped, and the RunStopped condition is set.
	RestartFailureStop RestartFailurePolicy = "Stop"
)

// RestartWeekday is a day of the week in a maintenance window.
// +kubebuilder:validation:Enum=Mon;Tue;Wed;Thu;Fri;Sat;Sun
type RestartWeekday string

// RestartWindow is a weekly maintenance window: restarts may start on the
// given days from start to end, wall-clock time in spec.timeZone.
// +kubebuilder:validation:XValidation:rule="self.start != self.end",message="start and end must differ (an end before the start crosses midnight)",fieldPath=".end"
type RestartWindow struct {
	// days the window opens on; empty means every day. A window that
	// crosses midnight belongs to the day it opens on.
	// +kubebuilder:validation:MaxItems=7
	// +listType=set
	// +optional
	Days []RestartWeekday `json:"days,omitempty"`
	// start is when the window opens, "HH:MM" (24-hour clock).
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	// +kubebuilder:validation:MaxLength=5
	// +required
	Start string `json:"start"`
	// end is when the window closes, "HH:MM" or "24:00" (exclusive). An end
	// earlier than start closes the window on the next day.
	// +kubebuilder:validation:Pattern=`^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$`
	// +kubebuilder:validation:MaxLength=5
	// +required
	End string `json:"end"`
}

// RestartTrigger says what started a run or a pod's replacement.
// +kubebuilder:validation:Enum=Schedule;RunNow;PodAge;Memory;Query
type RestartTrigger string

const (
	// RestartTriggerSchedule: a scheduled time of spec.schedule.
	RestartTriggerSchedule RestartTrigger = "Schedule"
	// RestartTriggerRunNow: a new token in RestartScheduleRunNowAnnotation.
	RestartTriggerRunNow RestartTrigger = "RunNow"
	// RestartTriggerPodAge: a pod older than a podAge trigger's maxAge.
	RestartTriggerPodAge RestartTrigger = "PodAge"
	// RestartTriggerMemory: a container's working set above a memory
	// trigger's threshold for its whole `for` duration.
	RestartTriggerMemory RestartTrigger = "Memory"
	// RestartTriggerQuery: a pod's value in a query trigger's answer above
	// its threshold for its whole `for` duration.
	RestartTriggerQuery RestartTrigger = "Query"
)

// RestartNeedTrigger is one condition under which a pod of a target
// workload needs replacing, whatever the schedule: exactly one member is
// set.
// +kubebuilder:validation:XValidation:rule="[has(self.podAge), has(self.memory), has(self.query)].filter(x, x).size() == 1",message="exactly one kind of trigger (podAge, memory, query) must be set"
type RestartNeedTrigger struct {
	// podAge replaces a pod once it is older than maxAge.
	// +optional
	PodAge *RestartPodAgeTrigger `json:"podAge,omitempty"`
	// memory replaces a pod whose container's working set, as the resource
	// metrics API (metrics.k8s.io PodMetrics) reports it, stays above a
	// threshold.
	// +optional
	Memory *RestartMemoryTrigger `json:"memory,omitempty"`
	// query replaces a pod whose value in the answer of a PromQL query to
	// a Prometheus-compatible API stays above a threshold (GPU memory, as
	// NVIDIA's DCGM exporter reports it, for instance).
	// +optional
	Query *RestartQueryTrigger `json:"query,omitempty"`
}

// RestartQueryTrigger replaces a pod once its value in the answer of an
// instant query has been above a threshold in every evaluation for the
// `for` duration: a value at or below it starts the count again, so spikes
// are ignored. The answer must be a vector with one series per pod,
// labelled with the pod's namespace and name; series of other namespaces,
// and of pods that are not the target workloads', are ignored. A query that
// fails (an unreachable endpoint, an error, an answer that is not a
// vector, a missing Secret) replaces nothing: the MetricsUnavailable
// condition says why, with reason QueryFailed.
type RestartQueryTrigger struct {
	// prometheus is the endpoint the query is sent to.
	// +required
	Prometheus RestartPrometheusEndpoint `json:"prometheus"`
	// expr is the PromQL instant query, evaluated at each look
	// ("max by (namespace, pod) (DCGM_FI_DEV_FB_USED)").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	// +required
	Expr string `json:"expr"`
	// namespaceLabel is the label of a series that holds the pod's
	// namespace.
	// +kubebuilder:default=namespace
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][a-zA-Z0-9_]*$`
	// +optional
	NamespaceLabel string `json:"namespaceLabel,omitempty"`
	// podLabel is the label of a series that holds the pod's name.
	// +kubebuilder:default=pod
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][a-zA-Z0-9_]*$`
	// +optional
	PodLabel string `json:"podLabel,omitempty"`
	// above is the threshold, a decimal number in the query's unit
	// ("20000", "0.9", "1e3"): a pod is a candidate while its value is
	// greater.
	// +required
	Above resource.Quantity `json:"above"`
	// for is how long the value must stay above the threshold, evaluation
	// after evaluation, before the pod is replaced. At most 24h.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="must be between 0s and 24h"
	// +optional
	For *metav1.Duration `json:"for,omitempty"`
	// limit is the value at which the pod fails (the GPU's memory size),
	// in the query's unit, at least above: the value the trend of the
	// pod's values is extrapolated to (spec.urgency, and the replacement
	// within a window of a pod that would not last to the next one).
	// Unset means above.
	// +optional
	Limit *resource.Quantity `json:"limit,omitempty"`
}

// RestartUrgency says when a pod is replaced at once, outside
// spec.windows and on spec.blackoutDates too.
type RestartUrgency struct {
	// predictedLimitWithin: a pod whose memory or query trigger predicts
	// it reaches its limit within this long (the trend of its values over
	// the trigger's for, at least the last minute, extrapolated by least
	// squares) is replaced at once, whatever the windows, blackout dates
	// and the trigger's for say. dryRun, suspend, minPodAge, cooldown,
	// maxConcurrent and PodDisruptionBudgets still hold it back. Between
	// 1s and 168h.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('168h')",message="must be between 1s and 168h"
	// +required
	PredictedLimitWithin metav1.Duration `json:"predictedLimitWithin"`
}

// RestartPrometheusEndpoint is where a query trigger sends its query: the
// Prometheus HTTP API (GET <url>/api/v1/query), or any server that serves
// it (Thanos, Mimir, VictoriaMetrics...). The server's certificate is
// always verified.
type RestartPrometheusEndpoint struct {
	// url is the base address of the API ("https://prometheus.monitoring:9090"),
	// http or https.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="must be an http or https URL with a host"
	// +required
	URL string `json:"url"`
	// bearerTokenSecret is a key of a Secret in the RestartSchedule's
	// namespace whose value is sent as "Authorization: Bearer <value>".
	// +optional
	BearerTokenSecret *RestartKeyReference `json:"bearerTokenSecret,omitempty"`
	// caBundle is the PEM certificates that verify an https server, in
	// place of the system's roots: a key of a Secret or of a ConfigMap in
	// the RestartSchedule's namespace.
	// +optional
	CABundle *RestartCABundleSource `json:"caBundle,omitempty"`
}

// RestartCABundleSource is a key of a Secret or of a ConfigMap: exactly one.
// +kubebuilder:validation:XValidation:rule="has(self.secret) != has(self.configMap)",message="exactly one of secret or configMap must be set"
type RestartCABundleSource struct {
	// secret is a key of a Secret in the RestartSchedule's namespace.
	// +optional
	Secret *RestartKeyReference `json:"secret,omitempty"`
	// configMap is a key of a ConfigMap in the RestartSchedule's namespace.
	// +optional
	ConfigMap *RestartKeyReference `json:"configMap,omitempty"`
}

// RestartKeyReference is a key of a Secret or ConfigMap in the
// RestartSchedule's namespace.
type RestartKeyReference struct {
	// name of the Secret or ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`
	// key in its data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	// +required
	Key string `json:"key"`
}

// RestartMemoryTrigger replaces a pod once a container's working set has
// been above a threshold in every sample for the `for` duration: a sample
// below it starts the count again, so spikes are ignored. A pod with no
// sample, a stale sample or, for percentOfLimit, no memory limit is never
// replaced by this trigger (the MetricsUnavailable condition says which).
// +kubebuilder:validation:XValidation:rule="has(self.percentOfLimit) != has(self.above)",message="exactly one of percentOfLimit or above must be set"
type RestartMemoryTrigger struct {
	// container is the name of the container to watch; empty means every
	// container of the pod, each judged alone.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Container string `json:"container,omitempty"`
	// percentOfLimit is the threshold as a percentage of the container's
	// memory limit (1 to 100).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	PercentOfLimit *int32 `json:"percentOfLimit,omitempty"`
	// above is the threshold as a positive quantity of bytes ("900Mi").
	// +optional
	Above *resource.Quantity `json:"above,omitempty"`
	// for is how long the working set must stay above the threshold, sample
	// after sample, before the pod is replaced. At most 24h.
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="must be between 0s and 24h"
	// +optional
	For *metav1.Duration `json:"for,omitempty"`
}

// RestartPodAgeTrigger replaces pods older than maxAge.
type RestartPodAgeTrigger struct {
	// maxAge is the age (since the pod's creation) past which a pod is
	// replaced. At least 1s, at most 8760h (a year).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('8760h')",message="must be between 1s and 8760h"
	// +required
	MaxAge metav1.Duration `json:"maxAge"`
}

// RestartActionScope says what a trigger replaces.
// +kubebuilder:validation:Enum=Pod;Workload
type RestartActionScope string

const (
	// RestartScopePod evicts only the pods a trigger names, through the
	// Eviction API: PodDisruptionBudgets are honoured, a refused eviction
	// waits, and no pod is ever deleted by force.
	RestartScopePod RestartActionScope = "Pod"
	// RestartScopeWorkload restarts the whole workload of a pod a trigger
	// names, as a scheduled run does: its pod template's restarted-at
	// annotation, its own rolling strategy, spec.maxConcurrent,
	// rolloutTimeout, failurePolicy and history. It waits while a run is
	// in progress.
	RestartScopeWorkload RestartActionScope = "Workload"
)

// RestartAction says how the pods spec.triggers name are replaced. The
// defaults suit a workload that cannot surge (a full GPU pool): one pod at
// a time, through the Eviction API, so that the workload is never short of
// more than one pod and its PodDisruptionBudgets are honoured.
type RestartAction struct {
	// scope: Pod (the default) evicts the pods the triggers name;
	// Workload restarts their workloads with a rolling restart, as a
	// scheduled run does (maxConcurrent below then does not apply: the
	// workload's own strategy and spec.maxConcurrent do).
	// +kubebuilder:default=Pod
	// +optional
	Scope RestartActionScope `json:"scope,omitempty"`
	// maxConcurrent is how many pods of one workload may be unavailable
	// (terminating, or not Ready) when a pod of it is evicted: with the
	// default 1, a pod is evicted only when every other pod of its workload
	// is Ready, so pods are replaced one at a time.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxConcurrent int32 `json:"maxConcurrent,omitempty"`
	// minPodAge: a pod younger than this is never replaced, whatever the
	// triggers say. It is also the cooldown of a pod: its replacement, even
	// one that reuses its name (a StatefulSet pod), is not replaced before it
	// is this old. At most 168h.
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('168h')",message="must be between 0s and 168h"
	// +optional
	MinPodAge *metav1.Duration `json:"minPodAge,omitempty"`
	// cooldown is the least time between two replacements in one workload
	// (two evictions). At most 168h.
	// +kubebuilder:default="0s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('168h')",message="must be between 0s and 168h"
	// +optional
	Cooldown *metav1.Duration `json:"cooldown,omitempty"`
}

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
	// RestartScheduleRunStoppedCondition is True when failurePolicy Stop
	// halted the last run after a failed restart; the message names the
	// workload. It turns False when the next run starts.
	RestartScheduleRunStoppedCondition = "RunStopped"
	// RestartScheduleTriggeredCondition is True while spec.triggers name
	// pods that need replacing; the message counts them and says what holds
	// them back. Unset when there are no triggers.
	RestartScheduleTriggeredCondition = "Triggered"
	// RestartScheduleMetricsUnavailableCondition is True while a trigger
	// lacks the data it needs (the metrics API is absent or fails, a sample
	// is stale, a container has no memory limit for percentOfLimit, a
	// query fails): the pods concerned are not replaced, and the message
	// says which. Unset without memory or query triggers.
	RestartScheduleMetricsUnavailableCondition = "MetricsUnavailable"
)

// RestartWorkloadReference names a workload in the RestartSchedule's namespace.
type RestartWorkloadReference struct {
	// kind of the workload.
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet;PodSet
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
	// targetRef restarts one Deployment, StatefulSet, DaemonSet or PodSet.
	// +optional
	TargetRef *RestartWorkloadReference `json:"targetRef,omitempty"`
	// selector restarts every Deployment, StatefulSet, DaemonSet and PodSet
	// of the namespace whose labels match, at most maxConcurrent at a time.
	// An empty selector matches every workload of the namespace.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// RestartScheduleSpec is the desired schedule of rolling restarts.
// +kubebuilder:validation:XValidation:rule="has(self.schedule) || (has(self.triggers) && size(self.triggers) > 0)",message="schedule is required unless triggers are set",fieldPath=".schedule"
// +kubebuilder:validation:XValidation:rule="!has(self.urgency) || (has(self.triggers) && self.triggers.exists(t, has(t.memory) || has(t.query)))",message="urgency needs a memory or query trigger",fieldPath=".urgency"
type RestartScheduleSpec struct {
	// schedule is a standard 5-field cron expression ("0 3 * * *") or a
	// descriptor: @yearly, @monthly, @weekly, @daily, @midnight, @hourly or
	// "@every <duration>" ("@every 6h"). Evaluated in timeZone.
	// A schedule that never fires (such as "0 0 31 2 *") is rejected.
	// Optional when triggers are set: the workloads are then restarted on
	// need only.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Schedule string `json:"schedule,omitempty"`

	// triggers replace pods of the target workloads when they need it,
	// between and without scheduled runs: a pod any trigger names is a
	// candidate, replaced as action says, only while windows and
	// blackoutDates let restarts start (urgency aside) and never while
	// suspended.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	Triggers []RestartNeedTrigger `json:"triggers,omitempty"`

	// action says how the pods triggers name are replaced.
	// +kubebuilder:default={}
	// +optional
	Action RestartAction `json:"action,omitempty"`

	// urgency replaces, outside windows and blackout dates too, the pods
	// memory and query triggers predict will soon reach their limit.
	// +optional
	Urgency *RestartUrgency `json:"urgency,omitempty"`

	// dryRun lists the pods triggers name in status.candidates, with
	// Events, and replaces none of them. Scheduled runs are not affected.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

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
	// At most 31536000 (365 days).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=31536000
	// +optional
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`

	// concurrencyPolicy: Forbid (default) skips a run while the previous run
	// is still rolling out; Replace abandons the previous run and restarts
	// again.
	// +kubebuilder:default=Forbid
	// +optional
	ConcurrencyPolicy RestartConcurrencyPolicy `json:"concurrencyPolicy,omitempty"`

	// maxConcurrent is how many selected workloads restart at once; the next
	// one starts when a previous rollout completes. At most 100 (each
	// workload rolling out is listed in status.active).
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxConcurrent int32 `json:"maxConcurrent,omitempty"`

	// rolloutTimeout is how long a restarted workload's rollout may take
	// before the restart is recorded as Failed. At most 168h (a week).
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be a positive duration"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('168h')",message="must be at most 168h"
	// +optional
	RolloutTimeout *metav1.Duration `json:"rolloutTimeout,omitempty"`

	// historyLimit is how many entries status.history keeps (newest first).
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	HistoryLimit int32 `json:"historyLimit,omitempty"`

	// windows, when set, are the only times a restart may start (wall-clock
	// times in timeZone): a run due outside all of them follows
	// outsideWindowPolicy, and a workload of a run whose turn comes after
	// the window closed waits or is skipped by the same policy. Restarts
	// already started are followed to completion. Empty means any time.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Windows []RestartWindow `json:"windows,omitempty"`

	// blackoutDates are dates on which no restart starts, whatever the
	// windows: "YYYY-MM-DD", or an inclusive range "YYYY-MM-DD/YYYY-MM-DD"
	// (a release freeze), as dates in timeZone.
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}(/[0-9]{4}-[0-9]{2}-[0-9]{2})?$`
	// +kubebuilder:validation:items:MaxLength=21
	// +kubebuilder:validation:XValidation:rule="self.all(d, d.size() == 10 || d.substring(0, 10) <= d.substring(11))",message="a range must not end before it starts"
	// +listType=atomic
	// +optional
	BlackoutDates []string `json:"blackoutDates,omitempty"`

	// outsideWindowPolicy is what a run due outside windows or on a
	// blackout date does: Skip (default) records it as Skipped; Defer starts
	// it at the next moment restarts may start, if that is within
	// startingDeadlineSeconds of its scheduled time (without a deadline, it
	// waits however long, until a later scheduled time supersedes it).
	// +kubebuilder:default=Skip
	// +optional
	OutsideWindowPolicy RestartOutsideWindowPolicy `json:"outsideWindowPolicy,omitempty"`

	// failurePolicy is what a run does when a restart fails (its rollout
	// failed or exceeded rolloutTimeout, or the workload was deleted):
	// Continue (default) goes on with the other workloads; Stop records
	// the workloads not yet started as Skipped, sets the RunStopped
	// condition and emits a RunStopped Event. Rollouts already started
	// are followed to completion either way.
	// +kubebuilder:default=Continue
	// +optional
	FailurePolicy RestartFailurePolicy `json:"failurePolicy,omitempty"`

	// jitter delays each workload's restart by up to this long after the
	// run's time, so that many schedules on one instant do not restart
	// everything at once. The delay of a workload is derived from the
	// schedule's UID, the workload and the run's time: the same after a
	// manager restart, different across workloads and schedules. At most 24h.
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('24h')",message="must be between 0s and 24h"
	// +optional
	Jitter *metav1.Duration `json:"jitter,omitempty"`
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
	// trigger is what started the run: Schedule (also when unset), RunNow,
	// or a trigger of action scope Workload.
	// +optional
	Trigger RestartTrigger `json:"trigger,omitempty"`
	// pod is, for a restart a trigger started (action scope Workload),
	// the pod it named.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Pod string `json:"pod,omitempty"`
	// value is what that trigger saw in the pod.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Value string `json:"value,omitempty"`
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
	// trigger is what started the run: Schedule (also when unset), RunNow,
	// or a trigger of action scope Workload.
	// +optional
	Trigger RestartTrigger `json:"trigger,omitempty"`
	// pod is, for a restart a trigger started (action scope Workload),
	// the pod it named.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Pod string `json:"pod,omitempty"`
	// value is what that trigger saw in the pod.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Value string `json:"value,omitempty"`
	// ignoreWindows is set for a run-now run whose request carried the
	// apps.deckhand.dev/run-now-ignore-windows override: it starts
	// regardless of windows and blackoutDates.
	// +optional
	IgnoreWindows bool `json:"ignoreWindows,omitempty"`
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
	// pod is the name of the pod a trigger replaced (action scope Pod), or
	// whose trigger restarted the workload (action scope Workload).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Pod string `json:"pod,omitempty"`
	// value is what the trigger observed ("26h0m0s old").
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Value string `json:"value,omitempty"`
	// predictedLimitAt is when the pod was predicted to reach its limit,
	// for a pod replaced with a prediction (see RestartCandidate).
	// +optional
	PredictedLimitAt *metav1.Time `json:"predictedLimitAt,omitempty"`
	// startTime is when the workload was patched.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when the result was recorded.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// result of the run for this workload.
	Result RestartResult `json:"result"`
	// message explains the result, in at most 1024 bytes. (Not a schema
	// limit: a longer message written by an earlier version must not make
	// the status unwritable.)
	// +optional
	Message string `json:"message,omitempty"`
}

// RestartCandidate is a pod that spec.triggers name.
type RestartCandidate struct {
	// pod is the pod's name.
	// +kubebuilder:validation:MaxLength=253
	Pod string `json:"pod"`
	// workload is "Kind/name" of the pod's workload.
	// +kubebuilder:validation:MaxLength=300
	Workload string `json:"workload"`
	// trigger is the trigger that names it.
	Trigger RestartTrigger `json:"trigger"`
	// container is the container a memory trigger observed.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Container string `json:"container,omitempty"`
	// value is what the trigger observed ("26h0m0s old").
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Value string `json:"value,omitempty"`
	// limit is the trigger's threshold ("24h0m0s").
	// +kubebuilder:validation:MaxLength=128
	// +optional
	Limit string `json:"limit,omitempty"`
	// since is when the pod first crossed the threshold; unset for a pod
	// named by its prediction alone.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// predictedLimitAt is when the trend of the pod's values reaches
	// predictedLimit (a memory or query trigger, with a rising trend);
	// a time already past when the trend is at or over it.
	// +optional
	PredictedLimitAt *metav1.Time `json:"predictedLimitAt,omitempty"`
	// predictedLimit is the value the prediction aims at: the container's
	// memory limit ("256Mi"), a memory trigger's above without one, or a
	// query trigger's limit (above when unset).
	// +kubebuilder:validation:MaxLength=128
	// +optional
	PredictedLimit string `json:"predictedLimit,omitempty"`
	// urgent is set when the pod is predicted to reach its limit within
	// spec.urgency.predictedLimitWithin: windows and blackout dates do not
	// hold it back.
	// +optional
	Urgent bool `json:"urgent,omitempty"`
	// heldBy says what keeps the pod from being replaced now (minPodAge,
	// maxConcurrent, cooldown, a window, a PodDisruptionBudget, dryRun);
	// empty when it is being replaced.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	HeldBy string `json:"heldBy,omitempty"`
}

// RestartCooldown is the last triggered replacement in one workload.
type RestartCooldown struct {
	// workload is "Kind/name".
	// +kubebuilder:validation:MaxLength=300
	Workload string `json:"workload"`
	// time of the replacement.
	Time metav1.Time `json:"time"`
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
	// nextScheduleTime is the next time a run is due by the cron schedule
	// alone (unset while suspended or invalid).
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`
	// nextRunScheduledTime is the scheduled time of the next run that will
	// really start, windows, blackoutDates and outsideWindowPolicy applied;
	// unset while suspended or invalid, or when no run can start within the
	// next thousand windows.
	// +optional
	NextRunScheduledTime *metav1.Time `json:"nextRunScheduledTime,omitempty"`
	// nextRunTime is when that run will start: its scheduled time, or with
	// outsideWindowPolicy Defer the window opening it waits for.
	// +optional
	NextRunTime *metav1.Time `json:"nextRunTime,omitempty"`
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
	// pending lists the next workloads of the current run waiting for
	// their turn (maxConcurrent), at most 100: a run of more workloads lists
	// the rest, in order of kind then name after pendingAfter, as these
	// start. pendingCount counts them all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Pending []RestartPending `json:"pending,omitempty"`
	// pendingCount is how many workloads of the current run wait for their
	// turn: those in pending and those still to be listed.
	// +optional
	PendingCount int32 `json:"pendingCount,omitempty"`
	// pendingAfter is "Kind/name" of the last workload of the current run
	// listed in pending; the selected workloads after it, by kind then name,
	// are still to come, listed (and selected anew) when pending runs
	// short. Empty when pending lists every waiting workload.
	// +optional
	// +kubebuilder:validation:MaxLength=300
	PendingAfter string `json:"pendingAfter,omitempty"`
	// history of runs, newest first, at most spec.historyLimit entries.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	History []RestartRecord `json:"history,omitempty"`
	// candidates are the pods spec.triggers name, worst first, at most 100;
	// candidateCount counts them all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Candidates []RestartCandidate `json:"candidates,omitempty"`
	// candidateCount is how many pods spec.triggers name.
	// +optional
	CandidateCount int32 `json:"candidateCount,omitempty"`
	// lastTriggered is, per workload, the time of the last triggered
	// replacement while it may still hold the next one back
	// (spec.action.cooldown), at most 100 workloads: past that, no workload
	// is replaced until an entry expires.
	// +optional
	// +listType=map
	// +listMapKey=workload
	// +kubebuilder:validation:MaxItems=100
	LastTriggered []RestartCooldown `json:"lastTriggered,omitempty"`
	// conditions: Ready, Suspended, InvalidSchedule, RunStopped, Triggered,
	// MetricsUnavailable, and Stalled while the schedule cannot be used.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RestartSchedule restarts Deployments, StatefulSets, DaemonSets or PodSets on a cron
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
// +kubebuilder:printcolumn:name="Next Run",type=string,JSONPath=`.status.nextRunTime`,priority=1,description="When the next restart will really start, windows and blackout dates applied"
// +kubebuilder:printcolumn:name="Waiting",type=integer,JSONPath=`.status.pendingCount`,priority=1,description="Workloads of the current run waiting for their turn"
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
