// Package podjson is the pod mutating webhook's hand-written JSON fast path:
// a single-pass reader of the few pod fields sidecar injection looks at
// (RawPod), the pre-encoded JSON of a SidecarSet's injectable parts
// (Fragments) and a writer of the JSON patch that adds them (WritePatch).
//
// Nothing of the pod is decoded into Go types or encoded again: the patch
// only adds, so fields this version of the Kubernetes API does not know
// survive untouched. The differential fuzz target in test/fuzz holds the
// patch to what typed decoding, the same mutation and controller-runtime's
// JSON diff produce; docs/sidecarset.md records what the fast path saves.
package podjson
