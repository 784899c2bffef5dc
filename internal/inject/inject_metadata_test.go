package inject

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// TestPatchPodMetadataTable: what spec.patchPodMetadata does to a pod's
// annotations, policy by policy, across SidecarSets in name order, and that
// keys outside the allowlist never reach a pod.
func TestPatchPodMetadataTable(t *testing.T) {
	web := map[string]string{"app": "web"}
	meta := func(policy deckhandv1alpha1.SidecarSetPatchPolicyType, kv ...string) deckhandv1alpha1.SidecarSetPatchPodMetadata {
		m := deckhandv1alpha1.SidecarSetPatchPodMetadata{PatchPolicy: policy, Annotations: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			m.Annotations[kv[i]] = kv[i+1]
		}
		return m
	}
	withMeta := func(name string, ms ...deckhandv1alpha1.SidecarSetPatchPodMetadata) *deckhandv1alpha1.SidecarSet {
		return set(name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.PatchPodMetadata = ms })
	}
	cases := map[string]struct {
		sets        []*deckhandv1alpha1.SidecarSet
		podAnn      map[string]string
		want        map[string]string // the annotations not under apps.deckhand.dev/
		wantWarning string
	}{
		"no patchPodMetadata": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", nil)},
			want: map[string]string{},
		},
		"retain sets an absent key, keeps a present one": {
			sets:   []*deckhandv1alpha1.SidecarSet{withMeta("a", meta("", "example.com/new", "x", "example.com/own", "theirs"))},
			podAnn: map[string]string{"example.com/own": "mine"},
			want:   map[string]string{"example.com/new": "x", "example.com/own": "mine"},
		},
		"overwrite replaces": {
			sets:   []*deckhandv1alpha1.SidecarSet{withMeta("a", meta(deckhandv1alpha1.SidecarSetOverwritePatchPolicy, "example.com/own", "theirs"))},
			podAnn: map[string]string{"example.com/own": "mine", "other": "kept"},
			want:   map[string]string{"example.com/own": "theirs", "other": "kept"},
		},
		"merge into a JSON object": {
			sets:   []*deckhandv1alpha1.SidecarSet{withMeta("a", meta(deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, "example.com/cfg", `{"b":{"y":2},"c":null,"d":"new"}`))},
			podAnn: map[string]string{"example.com/cfg": `{"a":1,"b":{"x":1},"c":true}`},
			want:   map[string]string{"example.com/cfg": `{"a":1,"b":{"x":1,"y":2},"d":"new"}`},
		},
		"merge into an absent annotation sets the value": {
			sets: []*deckhandv1alpha1.SidecarSet{withMeta("a", meta(deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, "example.com/cfg", `{"b":1}`))},
			want: map[string]string{"example.com/cfg": `{"b":1}`},
		},
		"merge into a value that is no JSON object keeps it and warns": {
			sets:        []*deckhandv1alpha1.SidecarSet{withMeta("a", meta(deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, "example.com/cfg", `{"b":1}`))},
			podAnn:      map[string]string{"example.com/cfg": `[1]`},
			want:        map[string]string{"example.com/cfg": `[1]`},
			wantWarning: `did not merge into annotation "example.com/cfg"`,
		},
		"later SidecarSets see what earlier ones set": {
			sets: []*deckhandv1alpha1.SidecarSet{
				withMeta("b", meta("", "example.com/k", "from-b"), meta(deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, "example.com/j", `{"b":2}`)),
				withMeta("a", meta(deckhandv1alpha1.SidecarSetOverwritePatchPolicy, "example.com/k", "from-a"), meta("", "example.com/j", `{"a":1}`)),
			},
			want: map[string]string{"example.com/k": "from-a", "example.com/j": `{"a":1,"b":2}`},
		},
		"entries of one SidecarSet apply in order": {
			sets: []*deckhandv1alpha1.SidecarSet{withMeta("a",
				meta("", "example.com/k", "first"),
				meta(deckhandv1alpha1.SidecarSetOverwritePatchPolicy, "example.com/k", "second"))},
			want: map[string]string{"example.com/k": "second"},
		},
		"keys outside the allowlist never reach the pod": {
			sets:   []*deckhandv1alpha1.SidecarSet{withMeta("a", meta(deckhandv1alpha1.SidecarSetOverwritePatchPolicy, "other.io/k", "x", "example.com/k", "y", "apps.deckhand.dev/sidecarsets", "forged"))},
			podAnn: map[string]string{"other.io/k": "mine"},
			want:   map[string]string{"other.io/k": "mine", "example.com/k": "y"},
		},
		"a SidecarSet that is not injected patches nothing": {
			sets: []*deckhandv1alpha1.SidecarSet{set("a", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.Containers[0].Name = "app" // the pod's own container wins
				s.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{meta("", "example.com/k", "x")}
			})},
			want:        map[string]string{},
			wantWarning: "was not injected",
		},
	}
	allow, err := sidecarcontrol.ParseMetadataAllowlist([]string{"example.com/*"})
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := testListerWith(t, sidecarcontrol.Options{PodMetadata: sidecarcontrol.PodMetadataAllowlists{Annotations: allow}}, nil, tc.sets...)
			p := pod(web, "app")
			p.Annotations = tc.podAnn
			got, resp := admit(t, l, "prod", p)
			ann := map[string]string{}
			for k, v := range got.Annotations {
				if !sidecarcontrol.IsReservedAnnotation(k) {
					ann[k] = v
				}
			}
			if !reflect.DeepEqual(ann, tc.want) {
				t.Errorf("annotations %v, want %v", ann, tc.want)
			}
			if tc.wantWarning != "" && !strings.Contains(strings.Join(resp.Warnings, "\n"), tc.wantWarning) {
				t.Errorf("warnings %q lack %q", resp.Warnings, tc.wantWarning)
			}
			// A second admission of the injected pod changes nothing more
			// than dropping the record the copy came with.
			again, _ := admit(t, l, "prod", got)
			if !reflect.DeepEqual(withoutRecord(again.Annotations), withoutRecord(got.Annotations)) {
				t.Errorf("a second injection changed the annotations: %v, then %v", got.Annotations, again.Annotations)
			}
		})
	}
}

// TestPatchPodMetadataCostsNothingUnused: a SidecarSet without
// patchPodMetadata compiles to no metadata work at all.
func TestPatchPodMetadataCostsNothingUnused(t *testing.T) {
	s := set("a", nil)
	l := testLister(t, nil, s)
	if c := l.Compiled(s); c.PodMetadata != nil {
		t.Fatalf("compiled metadata %v for a SidecarSet without patchPodMetadata", c.PodMetadata)
	}
	_ = corev1.Pod{}
}

// withoutRecord is annotations without the injection record (nil if
// nothing else).
func withoutRecord(annotations map[string]string) map[string]string {
	var out map[string]string
	for k, v := range annotations {
		switch k {
		case deckhandv1alpha1.SidecarSetInjectedAnnotation, deckhandv1alpha1.SidecarSetHashAnnotation, deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation:
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}
