// Package sidecarset holds the SidecarSet controller: it computes each
// SidecarSet's status from the pods it selects and rolls sidecar image
// changes out to the injected pods in place.
//
// A reconcile reads forward through the files named for its steps:
// Reconcile (sidecarset_controller.go) lists and classifies the pods
// (classify.go: each pod's injection record parsed once, its podStage in
// state.go), counts them (status.go), plans the rollout pass (plan.go) and
// acts on the plan (update.go: in place; hotupgrade.go, resize.go,
// recreate.go), then keeps the revision history (revisions.go). What it
// keeps between reconciles is in memory.go, with its one expiry rule.
package sidecarset
