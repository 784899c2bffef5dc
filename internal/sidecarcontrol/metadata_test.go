package sidecarcontrol

import (
	"maps"
	"slices"
	"testing"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestMetadataAllowlist(t *testing.T) {
	a, err := ParseMetadataAllowlist([]string{" example.com/* ", "", "team.io/owner", "*.corp.io/*"})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{
		"example.com/x":                 true,
		"example.com/":                  true,
		"example.com":                   false,
		"sub.example.com/x":             false,
		"team.io/owner":                 true,
		"team.io/owners":                false,
		"a.corp.io/k":                   true,
		"apps.deckhand.dev/sidecarsets": false,
		"other":                         false,
	} {
		if got := a.Allows(key); got != want {
			t.Errorf("Allows(%q) = %v, want %v", key, got, want)
		}
	}
	if (MetadataAllowlist{}).Allows("example.com/x") {
		t.Error("the empty allowlist allows a key")
	}
	if star, _ := ParseMetadataAllowlist([]string{"*"}); star.Allows("apps.deckhand.dev/x") {
		t.Error("a wildcard allowlist allows Deckhand's own keys")
	}
	if _, err := ParseMetadataAllowlist([]string{"example.com/["}); err == nil {
		t.Error("a bad pattern was accepted")
	}
	every, _ := ParseMetadataAllowlist([]string{"*/*", "*.apps.deckhand.dev/*"})
	for _, k := range []string{"podset.apps.deckhand.dev/controller-uid", "version.sidecarset.apps.deckhand.dev/mesh-1", "apps.deckhand.dev/sidecarsets"} {
		if every.Allows(k) {
			t.Errorf("an allowlist matching every key allows Deckhand's own %q", k)
		}
	}
}

func TestIsReservedAnnotation(t *testing.T) {
	for key, want := range map[string]bool{
		"apps.deckhand.dev/sidecarsets":               true,
		"podset.apps.deckhand.dev/controller-uid":     true,
		"version.sidecarset.apps.deckhand.dev/mesh-1": true,
		"Apps.Deckhand.Dev/x":                         true,
		"apps.deckhand.dev":                           false, // no prefix: a name, not a domain
		"notapps.deckhand.dev/x":                      false,
		"apps.deckhand.dev.example.com/x":             false,
		"example.com/apps.deckhand.dev":               false,
		"deckhand.dev/x":                              false,
	} {
		if got := IsReservedAnnotation(key); got != want {
			t.Errorf("IsReservedAnnotation(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestApplyPodMetadata: each policy over a pod that has the key and one
// that does not, a later entry building on an earlier one, and a merge into
// a value that is not a JSON object (kept, reported).
func TestApplyPodMetadata(t *testing.T) {
	patch := func(policy deckhandv1alpha1.SidecarSetPatchPolicyType, k, v string) MetadataPatch {
		return MetadataPatch{Policy: policy, Keys: []string{k}, Values: []string{v}}
	}
	for _, tc := range []struct {
		name      string
		pod       map[string]string
		patches   []MetadataPatch
		want      map[string]string
		notMerged []string
	}{
		{"retain sets a missing key", map[string]string{}, []MetadataPatch{patch(deckhandv1alpha1.SidecarSetRetainPatchPolicy, "k", "new")}, map[string]string{"k": "new"}, nil},
		{"retain keeps the pod's value", map[string]string{"k": "old"}, []MetadataPatch{patch(deckhandv1alpha1.SidecarSetRetainPatchPolicy, "k", "new")}, map[string]string{"k": "old"}, nil},
		{"retain keeps an empty value", map[string]string{"k": ""}, []MetadataPatch{patch(deckhandv1alpha1.SidecarSetRetainPatchPolicy, "k", "new")}, map[string]string{"k": ""}, nil},
		{"overwrite replaces", map[string]string{"k": "old"}, []MetadataPatch{patch(deckhandv1alpha1.SidecarSetOverwritePatchPolicy, "k", "new")}, map[string]string{"k": "new"}, nil},
		{"overwrite sets a missing key", nil, []MetadataPatch{patch(deckhandv1alpha1.SidecarSetOverwritePatchPolicy, "k", "new")}, map[string]string{"k": "new"}, nil},
		{"merge into an object", map[string]string{"k": `{"a":1,"b":{"c":2,"d":3},"e":4}`},
			[]MetadataPatch{patch(deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, "k", `{"b":{"c":5},"e":null,"f":"x"}`)},
			map[string]string{"k": `{"a":1,"b":{"c":5,"d":3},"f":"x"}`}, nil},
		{"merge sets a missing key as written", map[string]string{}, []MetadataPatch{patch(deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, "k", `{"z":1, "a":null}`)}, map[string]string{"k": `{"z":1, "a":null}`}, nil},
		{"merge sets an empty value", map[string]string{"k": ""}, []MetadataPatch{patch(deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, "k", `{"a":1}`)}, map[string]string{"k": `{"a":1}`}, nil},
		{"merge keeps a value that is not an object", map[string]string{"k": "plain"}, []MetadataPatch{patch(deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, "k", `{"a":1}`)}, map[string]string{"k": "plain"}, []string{"k"}},
		{"merge into an array is refused", map[string]string{"k": "[1]"}, []MetadataPatch{patch(deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, "k", `{"a":1}`)}, map[string]string{"k": "[1]"}, []string{"k"}},
		{"a later entry sees an earlier one", map[string]string{}, []MetadataPatch{
			patch(deckhandv1alpha1.SidecarSetRetainPatchPolicy, "k", `{"a":1}`),
			patch(deckhandv1alpha1.SidecarSetRetainPatchPolicy, "k", "ignored"),
			patch(deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, "k", `{"b":2}`),
		}, map[string]string{"k": `{"a":1,"b":2}`}, nil},
		{"several keys in one entry", map[string]string{"a": "1"}, []MetadataPatch{{Policy: deckhandv1alpha1.SidecarSetRetainPatchPolicy, Keys: []string{"a", "b"}, Values: []string{"x", "y"}}},
			map[string]string{"a": "1", "b": "y"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := maps.Clone(tc.pod)
			if got == nil {
				got = map[string]string{}
			}
			get := func(k string) (string, bool) { v, ok := got[k]; return v, ok }
			set := func(k, v string) { got[k] = v }
			notMerged := ApplyPodMetadata(tc.patches, get, set)
			if !maps.Equal(got, tc.want) {
				t.Errorf("annotations = %v, want %v", got, tc.want)
			}
			if !slices.Equal(notMerged, tc.notMerged) {
				t.Errorf("not merged = %v, want %v", notMerged, tc.notMerged)
			}
		})
	}
}
