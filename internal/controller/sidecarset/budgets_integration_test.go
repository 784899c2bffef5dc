package sidecarset_test

import (
	"testing"
	"time"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TestInPlaceUpdateHonoursPDB changes a sidecar's image over a Deployment of
// two pods whose PodDisruptionBudget allows no disruption: no pod is
// updated in place, status and an Event say why; with the budget relaxed
// the rollout completes.
func TestInPlaceUpdateHonoursPDB(t *testing.T) {
	sc := newScenario(t, "pdbinplace", func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.MaxUnavailable = podCount(2) })
	sc.deployApp(2)
	sc.waitUpdatedReady(60*time.Second, 2)
	sc.createPDB(0, 2)

	sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "proxy:2" })
	sc.waitStatus(30*time.Second, "both pods held back by the budget", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.DisruptionBlockedPods == 2 && s.Status.UpdatedPods == 0
	})
	waitEventOf(t, sc.name, map[string]string{"DisruptionBlocked": "PodDisruptionBudget"})

	pdb := sc.getPDB()
	pdb.Spec.MaxUnavailable = podCount(1)
	if err := env.Client.Update(ctxT(t), pdb); err != nil {
		t.Fatal(err)
	}
	sc.waitUpdatedReady(2*time.Minute, 2)
	if s := sc.waitStatus(30*time.Second, "nothing held back", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.DisruptionBlockedPods == 0
	}); s.Status.UpdatedPods != 2 {
		t.Errorf("status %+v", s.Status)
	}
}
