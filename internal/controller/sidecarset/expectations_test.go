package sidecarset_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestUnobservedUpdateHoldsOnlyUntilTTL: the controller waits for its
// cache to show a pod it updated before it updates more, but an update the
// cache never confirms (a lost event) holds the rollout only until the
// expectations' TTL, not forever.
func TestUnobservedUpdateHoldsOnlyUntilTTL(t *testing.T) {
	ns := env.Namespace(t)
	name := "ttl-" + ns
	createSidecarSet(t, newSidecarSet(name, ns, "ttl", "proxy:1"))
	p := newPod(ns, "pod-0", map[string]string{"app": "ttl"})
	if err := env.Client.Create(ctxT(t), p); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, name, 60*time.Second, "the pod matched and updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 1 && s.Status.UpdatedPods == 1
	})

	// As far as the controller knows, it updated pod-0 to a revision its
	// cache will never show.
	updateExpectations.ExpectUpdates(name, map[string]string{string(p.UID): "never-observed"})

	s := updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "proxy:2" })
	hash, _ := sidecarcontrol.Hashes(&s.Spec)
	// The status of the new generation is written by the reconcile that
	// decided the pod's update (updates come first), so once it is there
	// the pod was held.
	waitStatus(t, name, 30*time.Second, "the new revision computed", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.LatestRevision == hash
	})
	if img := podImage(t, ns, "pod-0", "proxy"); img != "proxy:1" {
		t.Fatalf("pod-0 was updated to %s while an update of it was still expected", img)
	}

	expectClock.Step(expectations.DefaultTTL + time.Second)
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		got := &corev1.Pod{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "pod-0"}, got); err != nil {
			return false, err
		}
		rev, _ := sidecarcontrol.ReadPodRecord(got.Annotations).Revisions(name)
		return containerImage(got, "proxy") == "proxy:2" && rev == hash, nil
	}, "pod-0 updated to proxy:2 once the unobserved expectation expired")
}

func podImage(t *testing.T, ns, pod, container string) string {
	t.Helper()
	got := &corev1.Pod{}
	if err := env.Client.Get(ctxT(t), types.NamespacedName{Namespace: ns, Name: pod}, got); err != nil {
		t.Fatal(err)
	}
	return containerImage(got, container)
}
