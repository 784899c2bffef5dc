package sidecarset_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// TestPercentagePartition checks that a percentage partition keeps that
// share of the matched pods, rounded up (docs/sidecarset.md), on the old
// revision: of 5 pods, "50%" keeps 3 and "10%" keeps 1, where rounding
// down would keep 2 and 0.
func TestPercentagePartition(t *testing.T) {
	ns := env.Namespace(t)
	name := "pct-" + ns
	s := newSidecarSet(name, ns, "pct", "proxy:1")
	s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	createSidecarSet(t, s)

	const n = 5
	createPods(t, ns, "pct", "pod-%d", n)
	before := waitStatus(t, name, 60*time.Second, "5 pods matched, updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == n && s.Status.UpdatedReadyPods == n
	})
	oldRevision := before.Status.LatestRevision

	s = updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "proxy:2"
		s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("50%"))
	})
	newRevision, _ := sidecarcontrol.Hashes(&s.Spec)
	checkPartition(t, name, ns, n, 3, oldRevision, newRevision)

	updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("10%"))
	})
	checkPartition(t, name, ns, n, 1, oldRevision, newRevision)

	updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("0%"))
	})
	waitStatus(t, name, 90*time.Second, "every pod updated with partition 0%", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.UpdatedReadyPods == n
	})
}

// checkPartition waits until the rollout reports itself held with
// total-kept pods updated, then checks that exactly kept pods are still on
// the old image and revision.
func checkPartition(t *testing.T, name, ns string, total, kept int32, oldRevision, newRevision string) {
	t.Helper()
	// UpdateHeld is reported only with no update in flight and none left
	// to make, so the counts it comes with are where the rollout stops, not
	// a moment on the way. AllPodsUpdated ends the wait too: a partition
	// that rounded to 0 lets every pod through.
	held := waitStatus(t, name, 90*time.Second, "the rollout stopped", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return c != nil && (c.Reason == "UpdateHeld" || c.Status == metav1.ConditionTrue)
	})
	if c := condition(held, deckhandv1alpha1.SidecarSetPodsUpdatedCondition); c.Reason != "UpdateHeld" ||
		held.Status.MatchedPods != total || held.Status.UpdatedPods != total-kept || held.Status.UpdatedReadyPods != total-kept {
		t.Fatalf("rollout stopped with %s; want UpdateHeld with %d pods updated and ready, %d kept", statusOf(&held), total-kept, kept)
	}
	pods, err := listPods(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	var old, updated int32
	for i := range pods {
		p := &pods[i]
		rev, _ := sidecarcontrol.ReadPodRecord(p.Annotations).Revisions(name)
		switch img := containerImage(p, "proxy"); {
		case img == "proxy:1" && rev == oldRevision:
			old++
		case img == "proxy:2" && rev == newRevision:
			updated++
		default:
			t.Errorf("pod %s: image %s at revision %s", p.Name, img, rev)
		}
	}
	if old != kept || updated != total-kept {
		t.Errorf("%d pods on the old revision and %d on the new, want %d and %d", old, updated, kept, total-kept)
	}
}
