// Package sidecarset holds the SidecarSet admission webhooks: defaulting
// and validation (with the dry run of a synthetic pod). The pod webhook
// that injects sidecars is internal/inject.
package sidecarset
