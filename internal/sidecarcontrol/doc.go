// Package sidecarcontrol holds the SidecarSet logic that the pod webhook and
// the SidecarSet controller share: which SidecarSets can match a pod (an
// informer index by namespace), selector matching, revision hashes and the
// annotations that record an injection on a pod.
package sidecarcontrol
