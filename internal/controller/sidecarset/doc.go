// Package sidecarset holds the SidecarSet controller: it computes each
// SidecarSet's status from the pods it selects and rolls sidecar image
// changes out to the injected pods in place.
package sidecarset
