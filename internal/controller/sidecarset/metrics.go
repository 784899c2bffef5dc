package sidecarset

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	podUpdates = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deckhand_sidecarset_pod_updates_total",
		Help: "In-place sidecar image updates of pods, by SidecarSet and result (success or error).",
	}, []string{"sidecarset", "result"})
	podsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "deckhand_sidecarset_pods",
		Help: "Pods a SidecarSet selects, by state (matched, updated, ready, updated_ready, not_injected, not_updatable).",
	}, []string{"sidecarset", "state"})
)

func init() {
	metrics.Registry.MustRegister(podUpdates, podsGauge)
}

func forgetMetrics(name string) {
	podsGauge.DeletePartialMatch(prometheus.Labels{"sidecarset": name})
	podUpdates.DeletePartialMatch(prometheus.Labels{"sidecarset": name})
}
