package podset

import "github.com/deckhand-dev/deckhand/internal/reconcileutil"

var metrics = reconcileutil.NewMetrics("podset")

// podOps counts the pod writes of the PodSet controller.
var podOps = metrics.CounterVec("pod_operations_total", "Pod writes by the PodSet controller, by operation (create, delete, evict, inplace_update, adopt, release) and result (success, error, or blocked: an eviction a PodDisruptionBudget refused).", "operation", "result")

// skippedSyncs counts syncs that did not act because expectations were not
// yet met (the cache lagged the controller's own writes).
var skippedSyncs = metrics.Counter("syncs_waiting_for_cache_total", "PodSet syncs that skipped creating/deleting pods because the cache had not yet observed earlier writes.")

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}
