package sidecarset_test

import (
	"context"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	sidecarsetctrl "github.com/deckhand-dev/deckhand/internal/controller/sidecarset"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// podMetadataAllowlist is the suite's --sidecarset-pod-metadata-allowlist
// and --sidecarset-pod-label-allowlist (suite_test.go).
const podMetadataAllowlist = "example.com/*"

// TestPatchPodMetadataOnInPlaceUpdate checks that an in-place update of a
// running pod's sidecar applies the new revision's patchPodMetadata in the
// same patch, each policy over what the pod has on the API server (which
// the manager's trimmed pod cache does not show): Retain sets only a key
// the pod lacks, Overwrite sets the new value, MergePatchJson merges it
// into the pod's JSON object and keeps the members the pod added; labels
// likewise under Retain and Overwrite. A pod value MergePatchJson cannot
// merge into is kept, with a Warning Event.
func TestPatchPodMetadataOnInPlaceUpdate(t *testing.T) {
	const (
		retain    = "example.com/retain"
		overwrite = "example.com/overwrite"
		merge     = "example.com/merge"
	)
	entries := func(v, obj string) []deckhandv1alpha1.SidecarSetPatchPodMetadata {
		return []deckhandv1alpha1.SidecarSetPatchPodMetadata{
			{Annotations: map[string]string{retain: v}, Labels: map[string]string{retain: v}},
			{PatchPolicy: deckhandv1alpha1.SidecarSetOverwritePatchPolicy, Annotations: map[string]string{overwrite: v}, Labels: map[string]string{overwrite: v}},
			{PatchPolicy: deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, Annotations: map[string]string{merge: obj}},
		}
	}
	sc := newScenario(t, "meta", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.PatchPodMetadata = entries("v1", `{"a":"1"}`)
	})

	own := sc.pod("own")
	own.Annotations = map[string]string{retain: "pod", merge: `{"own":"x"}`}
	own.Labels[retain] = "pod"
	own = sc.create(own)
	bare := sc.create(sc.pod("bare"))
	plain := sc.pod("plain")
	plain.Annotations = map[string]string{merge: "plain"}
	sc.create(plain)
	wantEntries(t, "annotations", own.Annotations, map[string]string{retain: "pod", overwrite: "v1", merge: `{"a":"1","own":"x"}`})
	wantEntries(t, "annotations", bare.Annotations, map[string]string{retain: "v1", overwrite: "v1", merge: `{"a":"1"}`})
	wantEntries(t, "labels", own.Labels, map[string]string{retain: "pod", overwrite: "v1"})
	wantEntries(t, "labels", bare.Labels, map[string]string{retain: "v1", overwrite: "v1"})
	sc.waitUpdatedReady(60*time.Second, 3)

	// The pod's owner changes the annotations after injection: bare loses
	// the Retain key and adds a member to the merged object.
	ctx := ctxT(t)
	patched := bare.DeepCopy()
	delete(patched.Annotations, retain)
	delete(patched.Labels, retain)
	patched.Annotations[merge] = `{"a":"1","mine":"y"}`
	if err := env.Client.Patch(ctx, patched, client.MergeFrom(bare)); err != nil {
		t.Fatal(err)
	}

	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "proxy:2"
		s.Spec.PatchPodMetadata = entries("v2", `{"a":"2","b":"3"}`)
	})
	for _, name := range []string{"own", "bare", "plain"} {
		testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
			p, err := sc.getPod(ctx, name)
			return err == nil && containerImage(p, "proxy") == "proxy:2", err
		}, "pod %s updated in place to proxy:2", name)
	}
	got, err := sc.getPod(ctx, "own")
	if err != nil {
		t.Fatal(err)
	}
	wantEntries(t, "annotations", got.Annotations, map[string]string{retain: "pod", overwrite: "v2", merge: `{"a":"2","b":"3","own":"x"}`})
	wantEntries(t, "labels", got.Labels, map[string]string{retain: "pod", overwrite: "v2"})
	got, err = sc.getPod(ctx, "bare")
	if err != nil {
		t.Fatal(err)
	}
	wantEntries(t, "annotations", got.Annotations, map[string]string{retain: "v2", overwrite: "v2", merge: `{"a":"2","b":"3","mine":"y"}`})
	wantEntries(t, "labels", got.Labels, map[string]string{retain: "v2", overwrite: "v2"})
	got, err = sc.getPod(ctx, "plain")
	if err != nil {
		t.Fatal(err)
	}
	wantEntries(t, "annotations", got.Annotations, map[string]string{overwrite: "v2", merge: "plain"})
	waitEvent(t, sc.name, corev1.EventTypeWarning, sidecarsetctrl.ReasonPodMetadataNotMerged, "/plain")
}

// wantEntries checks the values of the entries of have (a pod's
// annotations or labels, named by what) that want names.
func wantEntries(t *testing.T, what string, have, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for k := range want {
		if v, ok := have[k]; ok {
			got[k] = v
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("%s %v, want %v", what, got, want)
	}
}
