package podset

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// podOps counts the pod writes of the PodSet controller.
	podOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deckhand_podset_pod_operations_total",
		Help: "Pod writes by the PodSet controller, by operation (create, delete, inplace_update, adopt, release) and result (success, error).",
	}, []string{"operation", "result"})
	// skippedSyncs counts syncs that did not act because expectations were
	// not yet met (the cache lagged the controller's own writes).
	skippedSyncs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "deckhand_podset_syncs_waiting_for_cache_total",
		Help: "PodSet syncs that skipped creating/deleting pods because the cache had not yet observed earlier writes.",
	})
)

func init() {
	metrics.Registry.MustRegister(podOps, skippedSyncs)
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}
