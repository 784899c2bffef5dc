package typedinject

import (
	"bytes"
	"encoding/json"

	jsonpatch "github.com/evanphx/json-patch/v5"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// patchMetadata applies s's spec.patchPodMetadata to annotations (the
// pod's, as earlier SidecarSets left them), keeping only the keys allow
// allows. It reads the spec, not the compiled form, and merges JSON with
// another library than the fast path, so that the two are independent.
func patchMetadata(annotations map[string]string, s *deckhandv1alpha1.SidecarSet, allow sidecarcontrol.MetadataAllowlist) {
	for _, e := range s.Spec.PatchPodMetadata {
		for k, v := range e.Annotations {
			if !allow.Allows(k) {
				continue
			}
			cur, has := annotations[k]
			switch e.PatchPolicy {
			case deckhandv1alpha1.SidecarSetOverwritePatchPolicy:
				annotations[k] = v
			case deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy:
				if !has || cur == "" {
					annotations[k] = v
				} else if merged, ok := mergeJSON(cur, v); ok {
					annotations[k] = merged
				}
			default:
				if !has {
					annotations[k] = v
				}
			}
		}
	}
}

// patchLabels applies the labels of s's spec.patchPodMetadata to labels (the
// pod's, as earlier SidecarSets left them), keeping only the keys allow
// allows; MergePatchJson entries set no label.
func patchLabels(labels map[string]string, s *deckhandv1alpha1.SidecarSet, allow sidecarcontrol.MetadataAllowlist) {
	for _, e := range s.Spec.PatchPodMetadata {
		if e.PatchPolicy == deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy {
			continue
		}
		for k, v := range e.Labels {
			if !allow.Allows(k) {
				continue
			}
			if _, has := labels[k]; !has || e.PatchPolicy == deckhandv1alpha1.SidecarSetOverwritePatchPolicy {
				labels[k] = v
			}
		}
	}
}

// mergeJSON is RFC 7386 through evanphx/json-patch, normalised to compact
// JSON with sorted keys; ok is false unless both are JSON objects.
func mergeJSON(orig, patch string) (string, bool) {
	if !isObject(orig) || !isObject(patch) {
		return "", false
	}
	out, err := jsonpatch.MergePatch([]byte(orig), []byte(patch))
	if err != nil {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false
	}
	norm, err := json.Marshal(v)
	return string(norm), err == nil
}

func isObject(s string) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal([]byte(s), &m) == nil && m != nil
}
