package webserver

import "github.com/deckhand-dev/deckhand/internal/reconcileutil"

var metrics = reconcileutil.NewMetrics("webserver")

// appliesTotal counts what happened to each owned object per reconcile:
// skipped (already up to date, no request sent), created, updated,
// unchanged (applied, but the API server changed nothing) or error.
var appliesTotal = metrics.CounterVec("applies_total", "Server-side applies of WebServer Deployments and Services, by kind and result (skipped, created, updated, unchanged, error).", "kind", "result")

// conflictsTotal counts reconciles that found a Deployment or Service of a
// WebServer's name that the WebServer does not control.
var conflictsTotal = metrics.CounterVec("name_conflicts_total", "Reconciles that found a Deployment or Service with a WebServer's name not controlled by it, by kind.", "kind")
