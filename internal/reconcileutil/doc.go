// Package reconcileutil holds the reconcile skeleton every Deckhand
// controller shares: ordered phases with joined errors and the soonest
// requeue, the defaults a reconciler takes from its manager, and per-kind
// Prometheus metrics.
package reconcileutil
