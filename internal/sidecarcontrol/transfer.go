package sidecarcontrol

import (
	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TransferSource returns the name of the container t copies from: its
// sourceContainerName, or the pod label or annotation its
// sourceContainerNameFrom names ("" when the pod has none).
func TransferSource(t *deckhandv1alpha1.TransferEnvVar, labels, annotations map[string]string) string {
	if t.SourceContainerName != "" || t.SourceContainerNameFrom == nil || t.SourceContainerNameFrom.FieldRef == nil {
		return t.SourceContainerName
	}
	kind, key, err := ParseMetadataFieldPath(t.SourceContainerNameFrom.FieldRef.FieldPath)
	if err != nil {
		return ""
	}
	if kind == "labels" {
		return labels[key]
	}
	return annotations[key]
}

// TransferEnvNames returns the variables t copies, in order.
func TransferEnvNames(t *deckhandv1alpha1.TransferEnvVar) []string {
	if len(t.EnvNames) > 0 {
		return t.EnvNames
	}
	return []string{t.EnvName}
}
