package webserver

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// appliesTotal counts what happened to each owned object per reconcile:
	// skipped (already up to date, no request sent), created, updated,
	// unchanged (applied, but the API server changed nothing) or error.
	appliesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deckhand_webserver_applies_total",
		Help: "Server-side applies of WebServer Deployments and Services, by kind and result (skipped, created, updated, unchanged, error).",
	}, []string{"kind", "result"})

	// conflictsTotal counts reconciles that found a Deployment or Service of
	// a WebServer's name that the WebServer does not control.
	conflictsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "deckhand_webserver_name_conflicts_total",
		Help: "Reconciles that found a Deployment or Service with a WebServer's name not controlled by it, by kind.",
	}, []string{"kind"})
)

func init() {
	metrics.Registry.MustRegister(appliesTotal, conflictsTotal)
}
