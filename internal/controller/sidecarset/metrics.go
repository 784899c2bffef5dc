package sidecarset

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
)

var metrics = reconcileutil.NewMetrics("sidecarset")

// podUpdates counts in-place updates; podsGauge is the SidecarSet's status
// counts, by state.
var (
	podUpdates = metrics.CounterVec("pod_updates_total", "In-place sidecar image updates of pods, by SidecarSet and result (success or error).", "sidecarset", "result")
	podsGauge  = metrics.GaugeVec("pods", "Pods a SidecarSet selects, by state (matched, updated, ready, updated_ready, not_injected, not_updatable, resizing, evicting, disruption_blocked, unmanaged, hot_upgrading).", "sidecarset", "state")
	// podEvictions counts evictions under recreate: Evict.
	podEvictions = metrics.CounterVec("pod_evictions_total", "Evictions of pods to recreate them with the latest sidecars, by SidecarSet and result (success, blocked by a PodDisruptionBudget, stale cache, error).", "sidecarset", "result")
	// podConditionWrites counts writes of the pod condition
	// apps.deckhand.dev/SidecarSetsUpdatable: one per change, never one per
	// reconcile.
	podConditionWrites = metrics.CounterVec("pod_condition_writes_total", "Writes of the pod condition apps.deckhand.dev/SidecarSetsUpdatable, by SidecarSet and result (success, conflict, error).", "sidecarset", "result")
)

// forgetMetrics drops the series of a deleted SidecarSet.
func forgetMetrics(name string) {
	podsGauge.DeletePartialMatch(prometheus.Labels{"sidecarset": name})
	podUpdates.DeletePartialMatch(prometheus.Labels{"sidecarset": name})
	podEvictions.DeletePartialMatch(prometheus.Labels{"sidecarset": name})
	podConditionWrites.DeletePartialMatch(prometheus.Labels{"sidecarset": name})
}
