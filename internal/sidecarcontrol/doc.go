// Package sidecarcontrol holds the SidecarSet logic that the pod webhook and
// the SidecarSet controller share: which SidecarSets can match a pod (an
// informer index by namespace), what each SidecarSet generation implies
// (Compiled: selectors, revision hashes, the containers injected, hot
// upgrade slots, pod metadata and resources policies, as typed values;
// kept by the Lister from informer events) and the pod's record of its
// injections (PodRecord). How the pod webhook encodes what it injects is
// internal/inject's.
package sidecarcontrol
