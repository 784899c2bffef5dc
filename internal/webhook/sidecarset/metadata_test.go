package sidecarset_test

import (
	"strings"
	"testing"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TestPatchPodMetadataInjected: on the real API server, a pod injected by
// SidecarSets with patchPodMetadata carries their annotations, each policy
// applied to what the pod brought and to what SidecarSets earlier in name
// order set.
func TestPatchPodMetadataInjected(t *testing.T) {
	ns := env.Namespace(t)
	a := newSidecarSet("meta-a-"+ns, ns, "meta", sidecar("a", "a:1"))
	a.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{
		{Annotations: map[string]string{"example.com/team": "platform", "example.com/kept": "theirs"}},
		{PatchPolicy: deckhandv1alpha1.SidecarSetOverwritePatchPolicy, Annotations: map[string]string{"team.io/owner": "sre"}},
		{Labels: map[string]string{"example.com/tier": "edge", "example.com/kept": "theirs", "example.com/ver": "a"}},
	}
	b := newSidecarSet("meta-b-"+ns, ns, "meta", sidecar("b", "b:1"))
	b.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{
		{PatchPolicy: deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, Annotations: map[string]string{"example.com/config": `{"log":{"level":"debug"},"old":null}`}},
		{Annotations: map[string]string{"example.com/team": "from-b"}},
		{PatchPolicy: deckhandv1alpha1.SidecarSetOverwritePatchPolicy, Labels: map[string]string{"example.com/ver": "b"}},
	}
	createSidecarSet(t, a)
	createSidecarSet(t, b)

	p := newPod(ns, "web", map[string]string{"app": "meta"}, "app")
	p.Annotations = map[string]string{
		"example.com/kept":   "mine",
		"team.io/owner":      "dev",
		"example.com/config": `{"log":{"format":"json"},"old":1}`,
	}
	p.Labels["example.com/kept"] = "mine"
	got := createPod(t, p)
	wantLabels := map[string]string{
		"app":              "meta",
		"example.com/tier": "edge", // Retain, unset on the pod
		"example.com/kept": "mine", // Retain: the pod's own
		"example.com/ver":  "b",    // Overwrite by b, after a's Retain
	}
	for k, v := range wantLabels {
		if got.Labels[k] != v {
			t.Errorf("label %s = %q, want %q (all: %v)", k, got.Labels[k], v, got.Labels)
		}
	}
	want := map[string]string{
		"example.com/team":   "platform", // Retain: a, first in name order, set it
		"example.com/kept":   "mine",     // Retain: the pod's own
		"team.io/owner":      "sre",      // Overwrite
		"example.com/config": `{"log":{"format":"json","level":"debug"}}`,
	}
	for k, v := range want {
		if got.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q (all: %v)", k, got.Annotations[k], v, got.Annotations)
		}
	}
	if n := names(got.Spec.Containers); strings.Join(n, ",") != "a,b,app" {
		t.Errorf("containers %v", n)
	}
}

// TestPatchPodMetadataValidation: the validating webhook refuses, naming
// the field and key, annotation keys outside the manager's allowlist,
// Deckhand's own keys, MergePatchJson values that are not JSON objects, and
// patchPodMetadata in Policy mode.
func TestPatchPodMetadataValidation(t *testing.T) {
	ns := env.Namespace(t)
	type meta = deckhandv1alpha1.SidecarSetPatchPodMetadata
	annotation := func(key, value string) meta { return meta{Annotations: map[string]string{key: value}} }
	label := func(key, value string) meta { return meta{Labels: map[string]string{key: value}} }
	mergeJSON := func(m meta) meta {
		m.PatchPolicy = deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy
		return m
	}
	policy := deckhandv1alpha1.PolicyInjection
	cases := []struct {
		name  string
		meta  []meta
		mode  deckhandv1alpha1.InjectionMode
		field string
		words string
	}{
		{"key outside the allowlist", []meta{annotation("example.com/ok", "x"), annotation("other.io/secret", "x")},
			"", "spec.patchPodMetadata[1].annotations[other.io/secret]", "--sidecarset-pod-metadata-allowlist"},
		{"Deckhand's own key", []meta{annotation("apps.deckhand.dev/sidecarsets", "forged")},
			"", "spec.patchPodMetadata[0].annotations[apps.deckhand.dev/sidecarsets]", "Deckhand's own"},
		{"Deckhand's own subdomain", []meta{annotation("version.sidecarset.apps.deckhand.dev/mesh", "forged")},
			"", "spec.patchPodMetadata[0].annotations[version.sidecarset.apps.deckhand.dev/mesh]", "Deckhand's own"},
		{"MergePatchJson with no JSON object", []meta{mergeJSON(annotation("example.com/cfg", "[1]"))},
			"", "spec.patchPodMetadata[0].annotations[example.com/cfg]", "JSON object"},
		{"unknown policy", []meta{{PatchPolicy: "Append", Annotations: map[string]string{"example.com/cfg": "x"}}},
			"", "spec.patchPodMetadata[0].patchPolicy", "Unsupported value"},
		{"no annotations nor labels", []meta{{}}, "", "spec.patchPodMetadata[0]", "name at least one annotation or label"},
		// team.io/owner is allowed as an annotation, not as a label.
		{"label key outside the label allowlist", []meta{label("example.com/ok", "x"), label("team.io/owner", "x")},
			"", "spec.patchPodMetadata[1].labels[team.io/owner]", "--sidecarset-pod-label-allowlist"},
		{"label key of the SidecarSet's selector", []meta{label("app", "other")}, "", "spec.patchPodMetadata[0].labels[app]", "spec.selector"},
		{"Deckhand's own label key", []meta{label("apps.deckhand.dev/x", "y")}, "", "spec.patchPodMetadata[0].labels[apps.deckhand.dev/x]", "Deckhand's own"},
		{"invalid label value", []meta{label("example.com/tier", "not a value")}, "", "spec.patchPodMetadata[0].labels", "not a value"},
		{"labels under MergePatchJson", []meta{mergeJSON(label("example.com/tier", "x"))}, "", "spec.patchPodMetadata[0].labels", "annotations only"},
		{"labels in Policy mode", []meta{label("example.com/tier", "x")},
			policy, "spec.patchPodMetadata", "spec.injectionMode: Policy does not support spec.patchPodMetadata"},
		{"invalid key", []meta{annotation("example.com/bad key", "x")}, "", "spec.patchPodMetadata[0].annotations", "bad key"},
		{"Policy mode", []meta{annotation("example.com/ok", "x")},
			policy, "spec.patchPodMetadata", "spec.injectionMode: Policy does not support spec.patchPodMetadata"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newSidecarSet("bad-meta-"+ns+"-"+string(rune('a'+i)), ns, "web", sidecar("proxy", "proxy:1"))
			s.Spec.PatchPodMetadata = tc.meta
			s.Spec.InjectionMode = tc.mode
			wantRefused(t, s, tc.field, tc.words)
		})
	}
	// An allowed key is accepted (the cases above fail for their own reason).
	ok := newSidecarSet("good-meta-"+ns, ns, "web", sidecar("proxy", "proxy:1"))
	ok.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{
		{Annotations: map[string]string{"example.com/ok": "x", "team.io/owner": "y"}},
		{PatchPolicy: deckhandv1alpha1.SidecarSetOverwritePatchPolicy, Labels: map[string]string{"example.com/tier": "x"}},
	}
	createSidecarSet(t, ok)
}
