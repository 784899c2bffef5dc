package podjson

import (
	"fmt"
	"strings"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// ParseMetadataFieldPath reads a transferEnv sourceContainerNameFrom field
// path, metadata.labels['<key>'] or metadata.annotations['<key>'] (the
// downward API's subscript form), into the map it names ("labels" or
// "annotations") and the key.
func ParseMetadataFieldPath(fp string) (kind, key string, err error) {
	for _, k := range []string{"labels", "annotations"} {
		prefix := "metadata." + k + "['"
		if rest, ok := strings.CutPrefix(fp, prefix); ok {
			key, ok := strings.CutSuffix(rest, "']")
			if !ok || key == "" || strings.ContainsAny(key, "'[]") {
				break
			}
			return k, key, nil
		}
	}
	return "", "", fmt.Errorf("must be metadata.labels['<key>'] or metadata.annotations['<key>']")
}

// sourceContainer returns the name of the container t copies from: its
// sourceContainerName, or the pod label or annotation its
// sourceContainerNameFrom names ("" when the pod has none).
func sourceContainer(t *deckhandv1alpha1.TransferEnvVar, labels, annotations map[string]string) string {
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

// envNamesOf returns the variables t copies, in order.
func envNamesOf(t *deckhandv1alpha1.TransferEnvVar) []string {
	if len(t.EnvNames) > 0 {
		return t.EnvNames
	}
	return []string{t.EnvName}
}
