package restartschedule

import "github.com/deckhand-dev/deckhand/internal/reconcileutil"

var metrics = reconcileutil.NewMetrics("restartschedule")

// restartsTotal counts recorded restart results, one per workload per run
// (plus one per Missed or wholly Skipped run).
var restartsTotal = metrics.CounterVec("restarts_total", "Restart results recorded by RestartSchedules, by result (Succeeded, Failed, Skipped, Missed).", "result")

// restartSkew is the time between a slot's scheduled time and the patch
// that restarted a workload for it.
var restartSkew = metrics.Histogram("restart_skew_seconds", "Seconds between a run's scheduled time and the pod-template patch that restarted a workload.",
	[]float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600})
