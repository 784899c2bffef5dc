package sidecarpolicy_test

import (
	"testing"
	"time"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// TestPolicyModeInitContainerChangeReachesNewPodsOnly: in Policy mode as in
// Webhook mode, a change of a plain init container's image reaches the pods
// created afterwards (through the recompiled policy) while the pods already
// there keep their spec and record and count as updated.
func TestPolicyModeInitContainerChangeReachesNewPodsOnly(t *testing.T) {
	ns := env.Namespace(t)
	s := policySet("init-"+ns[len(ns)-5:], ns, "")
	s.Spec.Containers = nil
	s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{sc("setup", "setup:1", "")}
	createSidecarSet(t, s)
	waitPolicyReady(t, s.Name)
	eventuallyInjects(t, ns, setupImage, "setup:1")
	old := createWebPod(t, ns, "old")
	if img := setupImage(old); img != "setup:1" {
		t.Fatalf("pod old got setup image %q, want setup:1", img)
	}
	first, _ := sidecarcontrol.ReadPodRecord(old.Annotations).Revisions(s.Name)
	waitSidecarSet(t, time.Minute, s.Name, "1 pod matched and updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		st := s.Status
		return st.LatestRevision == first && st.MatchedPods == 1 && st.UpdatedPods == 1
	})

	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InitContainers[0].Image = "setup:2" })
	waitPolicyReady(t, s.Name)
	eventuallyInjects(t, ns, setupImage, "setup:2")
	fresh := createWebPod(t, ns, "fresh")
	second, _ := sidecarcontrol.ReadPodRecord(fresh.Annotations).Revisions(s.Name)
	if img := setupImage(fresh); img != "setup:2" || second == first {
		t.Fatalf("pod fresh got setup image %q at revision %s, want setup:2 at a new revision", img, second)
	}
	// The status counts the new pod after the reconcile that saw the change:
	// any patch of the old pod would have been written by then.
	waitSidecarSet(t, time.Minute, s.Name, "2 pods matched and updated at the new revision", func(s *deckhandv1alpha1.SidecarSet) bool {
		st := s.Status
		return st.LatestRevision == second && st.MatchedPods == 2 && st.UpdatedPods == 2 && st.NotUpdatablePods == 0
	})
	got := getPod(t, ns, "old")
	if img := setupImage(got); img != "setup:1" {
		t.Errorf("pod old: setup image %s, want setup:1 (a plain init container is never patched in place)", img)
	}
	if rev, _ := sidecarcontrol.ReadPodRecord(got.Annotations).Revisions(s.Name); rev != first {
		t.Errorf("pod old records revision %s, want its own %s", rev, first)
	}
}
