package restartschedule

import (
	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/eviction"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
)

var metrics = reconcileutil.NewMetrics("restartschedule")

// restartsTotal counts recorded restart results, one per workload per run
// (plus one per Missed or wholly Skipped run).
var restartsTotal = metrics.CounterVec("restarts_total", "Restart results recorded by RestartSchedules, by result (Succeeded, Failed, Skipped, Missed).", "result")

// NOTE: every result starts at 0, so that the series exist before the first
// restart: an alert on increase(...{result="Failed"}) then sees the first
// failure, which it would miss if the series first appeared at 1. The same
// holds for each trigger's evictions and each reason of missing data.
func init() {
	for _, r := range []deckhandv1alpha1.RestartResult{deckhandv1alpha1.RestartSucceeded, deckhandv1alpha1.RestartFailed,
		deckhandv1alpha1.RestartSkipped, deckhandv1alpha1.RestartMissed} {
		restartsTotal.WithLabelValues(string(r))
	}
	for _, trigger := range []deckhandv1alpha1.RestartTrigger{deckhandv1alpha1.RestartTriggerPodAge, deckhandv1alpha1.RestartTriggerMemory,
		deckhandv1alpha1.RestartTriggerQuery} {
		for _, result := range []eviction.Result{eviction.Evicted, eviction.Blocked, eviction.Stale, eviction.Failed} {
			podEvictions.WithLabelValues(string(trigger), result.String())
		}
	}
	for _, reason := range []string{ReasonMetricsAPIUnavailable, ReasonStaleMetrics, ReasonNoMemoryLimit, ReasonQueryFailed} {
		triggerDataMissing.WithLabelValues(reason)
	}
}

// restartSkew is the time between a slot's scheduled time and the patch
// that restarted a workload for it.
var restartSkew = metrics.Histogram("restart_skew_seconds", "Seconds between a run's scheduled time and the pod-template patch that restarted a workload.",
	[]float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600})

// triggerDataMissing counts the times a RestartSchedule's triggers found
// data missing (its MetricsUnavailable condition turning True), by reason.
var triggerDataMissing = metrics.CounterVec("trigger_data_missing_total",
	"Times a RestartSchedule's triggers could not judge pods for lack of data (MetricsUnavailable turning True), by reason.", "reason")

// podEvictions counts the evictions RestartSchedules' triggers asked for,
// by trigger and result (eviction.Result: success, blocked by a
// PodDisruptionBudget, stale, error). A blocked pod stays a candidate and
// its eviction is asked again every few seconds, each time counted.
var podEvictions = metrics.CounterVec("pod_evictions_total",
	"Evictions asked for by RestartSchedules' triggers, by trigger (PodAge, Memory, Query) and result (success, blocked by a PodDisruptionBudget, stale, error).",
	"trigger", "result")
