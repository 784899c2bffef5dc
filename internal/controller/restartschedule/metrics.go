package restartschedule

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// restartsTotal counts recorded restart results, one per workload per run
	// (plus one per Missed or wholly Skipped run).
	restartsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deckhand_restartschedule_restarts_total",
		Help: "Restart results recorded by RestartSchedules, by result (Succeeded, Failed, Skipped, Missed).",
	}, []string{"result"})

	// restartSkew is the time between a slot's scheduled time and the patch
	// that restarted a workload for it.
	restartSkew = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "deckhand_restartschedule_restart_skew_seconds",
		Help:    "Seconds between a run's scheduled time and the pod-template patch that restarted a workload.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
	})
)

func init() {
	metrics.Registry.MustRegister(restartsTotal, restartSkew)
}
