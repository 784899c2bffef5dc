// Package sidecarset holds the SidecarSet admission webhooks: the pod
// mutating webhook that injects sidecars when a pod is created, and the
// SidecarSet defaulting and validating webhooks.
package sidecarset
