// Package inject is the pod mutating webhook that injects SidecarSets'
// sidecars into pods being created: the handler (Handler), the planner that
// decides, SidecarSet by SidecarSet, what a pod gets, the JSON fast path
// that reads the pod and writes the patch (podjson), and the encoded form
// of each compiled SidecarSet, kept once per generation.
//
// What to inject is sidecarcontrol's decision, in typed Go values; this
// package owns the wire format only.
package inject
