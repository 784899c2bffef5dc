package sidecarset_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// waitLatestRevision waits until the SidecarSet's status names the
// ControllerRevision of its current spec, and the revision cache the
// webhook reads has it.
func waitLatestRevision(t *testing.T, name string) *deckhandv1alpha1.SidecarSet {
	t.Helper()
	s := &deckhandv1alpha1.SidecarSet{}
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, s); err != nil {
			return false, err
		}
		hash, _ := sidecarcontrol.Hashes(&s.Spec)
		return s.Status.LatestRevision == hash && s.Status.LatestRevisionName != "", nil
	}, "SidecarSet %s records the ControllerRevision of its spec", name)
	return s
}

// A pod created while injectionStrategy.revision pins an older revision
// gets that revision's containers and records its hash; a pin that names no
// revision is refused, naming the field, and so is policy Partial in Policy
// mode.
func TestPinnedRevisionIsInjected(t *testing.T) {
	ns := env.Namespace(t)
	s := newSidecarSet("pinned-"+ns, ns, "web", sidecar("proxy", "proxy:1"))
	s.Labels = map[string]string{deckhandv1alpha1.SidecarSetCustomVersionLabel: "one"}
	createSidecarSet(t, s)
	first := waitLatestRevision(t, s.Name)

	// Pinning on create: the SidecarSet has no revisions yet.
	early := newSidecarSet("pinned-early-"+ns, ns, "other", sidecar("proxy", "proxy:1"))
	early.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{CustomVersion: ptr.To("one")}
	err := env.Client.Create(ctxT(t), early)
	if err == nil || !strings.Contains(err.Error(), "spec.injectionStrategy.revision.customVersion: Not found") {
		t.Fatalf("creating a SidecarSet pinned to a revision it cannot have: %v, want a refusal naming the field", err)
	}

	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "proxy:2"
		s.Spec.UpdateStrategy.Paused = true
		s.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{RevisionName: ptr.To(first.Status.LatestRevisionName)}
	})
	second := waitLatestRevision(t, s.Name)
	waitCached(t, second)
	pod := createPod(t, newPod(ns, "pinned", map[string]string{"app": "web"}, "app"))
	if c := podutil.FindContainer(pod.Spec.Containers, "proxy"); c == nil || c.Image != "proxy:1" {
		t.Fatalf("pod created while pinned: containers %v, want proxy at the pinned proxy:1", pod.Spec.Containers)
	}
	if rev, _ := sidecarcontrol.ReadPodRecord(pod.Annotations).Revisions(s.Name); rev != first.Status.LatestRevision || rev == second.Status.LatestRevision {
		t.Fatalf("pod created while pinned records revision %s, want the pinned %s", rev, first.Status.LatestRevision)
	}

	// Unpinned: the latest.
	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InjectionStrategy.Revision = nil })
	pod = createPod(t, newPod(ns, "latest", map[string]string{"app": "web"}, "app"))
	if c := podutil.FindContainer(pod.Spec.Containers, "proxy"); c == nil || c.Image != "proxy:2" {
		t.Fatalf("pod created without a pin: containers %v, want proxy:2", pod.Spec.Containers)
	}

	// Partial cannot be expressed in a MutatingAdmissionPolicy.
	err = tryUpdateSidecarSet(t, s.Name, func(cur *deckhandv1alpha1.SidecarSet) {
		cur.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection
		cur.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{CustomVersion: ptr.To("one"), Policy: deckhandv1alpha1.PartialInjectRevision}
	})
	if err == nil || !strings.Contains(err.Error(), "spec.injectionStrategy.revision.policy") || !strings.Contains(err.Error(), "spec.injectionMode: Policy does not support") {
		t.Fatalf("policy Partial in Policy mode: %v, want a refusal naming the field", err)
	}
}
