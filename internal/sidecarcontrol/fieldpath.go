package sidecarcontrol

import (
	"fmt"
	"strings"
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
