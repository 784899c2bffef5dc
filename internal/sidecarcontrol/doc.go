// Package sidecarcontrol holds the SidecarSet logic that the pod webhook and
// the SidecarSet controller share: which SidecarSets can match a pod (an
// informer index by namespace), what each SidecarSet generation implies
// (Compiled: selectors, revision hashes, encoded injectable parts; kept by
// the Lister from informer events) and the pod's record of its injections
// (PodRecord).
package sidecarcontrol
