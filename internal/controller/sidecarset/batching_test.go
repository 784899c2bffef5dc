package sidecarset_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	sidecarsetctrl "github.com/deckhand-dev/deckhand/internal/controller/sidecarset"
)

// TestPodEventsBatched counts every reconcile of the sidecarset controller,
// so it runs first in the package (its file sorts first): later tests leave
// namespaces being deleted whose pod events would add to the count.
//
// A burst of pods (each created, scheduled, started and made Ready: several
// events a pod) costs about one reconcile of their
// SidecarSet per DefaultPodEventDelay while it lasts, not one per event,
// and the status still ends up counting every pod.
func TestPodEventsBatched(t *testing.T) {
	sc := newScenario(t, "batched")
	sc.waitStatus(30*time.Second, "an empty SidecarSet reports its status", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 0
	})
	// Let any reconcile the creation queued run before counting.
	time.Sleep(2 * sidecarsetctrl.DefaultPodEventDelay)

	const pods = 40
	before := sidecarSetReconciles(t)
	start := time.Now()
	sc.createPods("batched-%d", pods)
	sc.waitStatus(90*time.Second, fmt.Sprintf("%d pods matched and ready", pods), func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == pods && s.Status.ReadyPods == pods
	})
	elapsed := time.Since(start)
	reconciles := waitReconcileCounted(t, before) - before

	// One reconcile per delay while events keep coming, plus one for the
	// last batch and some slack for the rollout-requeue and status writes.
	bound := math.Ceil(elapsed.Seconds()/sidecarsetctrl.DefaultPodEventDelay.Seconds()) + 3
	t.Logf("%d pods (about %d pod events) over %s: %.0f reconciles (bound %.0f)", pods, 4*pods, elapsed.Round(time.Millisecond), reconciles, bound)
	if reconciles > bound {
		t.Fatalf("%.0f reconciles of the SidecarSet for a burst of %d pods over %s; batching allows at most %.0f",
			reconciles, pods, elapsed.Round(time.Millisecond), bound)
	}
	if reconciles < 1 {
		t.Fatalf("no reconcile counted: the metric read is wrong")
	}
}
