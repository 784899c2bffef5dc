package v1alpha1

import corev1 "k8s.io/api/core/v1"

// SourceContainerNameSource names a transferEnv source container through
// the metadata of the pod being injected.
type SourceContainerNameSource struct {
	// FieldRef selects a label or annotation of the pod:
	// metadata.labels['<key>'] or metadata.annotations['<key>'] (the only
	// field paths supported). A pod without it transfers nothing.
	FieldRef *corev1.ObjectFieldSelector `json:"fieldRef"`
}
