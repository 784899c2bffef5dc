package restartschedule

import (
	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
)

var metrics = reconcileutil.NewMetrics("restartschedule")

// restartsTotal counts recorded restart results, one per workload per run
// (plus one per Missed or wholly Skipped run).
var restartsTotal = metrics.CounterVec("restarts_total", "Restart results recorded by RestartSchedules, by result (Succeeded, Failed, Skipped, Missed).", "result")

// NOTE: every result starts at 0, so that the series exist before the first
// restart: an alert on increase(...{result="Failed"}) then sees the first
// failure, which it would miss if the series first appeared at 1.
func init() {
	for _, r := range []deckhandv1alpha1.RestartResult{deckhandv1alpha1.RestartSucceeded, deckhandv1alpha1.RestartFailed,
		deckhandv1alpha1.RestartSkipped, deckhandv1alpha1.RestartMissed} {
		restartsTotal.WithLabelValues(string(r))
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
