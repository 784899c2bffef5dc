package sidecarset

import (
	"testing"
	"time"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/expectations"
)

// TestMemoryExpiry pins the SidecarSet half of memory's expiry rule: what
// is kept about a SidecarSet lasts while it exists under the same UID, and
// goes when it is deleted. (The pod half is pinned by
// TestRecreateStateObserve and TestClassifyCache.)
func TestMemoryExpiry(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newCacheFixture(1)
	// renewed is a SidecarSet of the same name created after f.set was deleted.
	renewed := f.set.DeepCopy()
	renewed.UID = "renewed-uid"
	m := memory{updates: expectations.New()}
	fill := func(s *deckhandv1alpha1.SidecarSet) *setMemory {
		e := m.of(s)
		e.recreates.evictionStarted(f.pod("p", "1", true), nil, now)
		e.recreates.refuseResize("p/hash")
		m.updates.ExpectUpdates(s.Name, map[string]string{"q": "hash"})
		m.observeCost(s.Name, time.Second)
		return e
	}
	empty := func(what string, e *setMemory) {
		t.Helper()
		if len(e.recreates.evicted)+len(e.recreates.resizeRefused) != 0 || len(m.updates.PendingUpdates("s")) != 0 || m.podEventDelay("s", 0) != 0 {
			t.Errorf("%s: evicted %d, refused %d, expected updates %d, delay %s; want nothing kept", what,
				len(e.recreates.evicted), len(e.recreates.resizeRefused), len(m.updates.PendingUpdates("s")), m.podEventDelay("s", 0))
		}
	}

	first := fill(f.set)
	if again := m.of(f.set.DeepCopy()); again != first || len(again.recreates.evicted) != 1 || len(m.updates.PendingUpdates("s")) != 1 {
		t.Fatalf("the same SidecarSet again: memory not kept")
	}
	empty("a new SidecarSet of the same name", m.of(renewed.DeepCopy()))

	fill(renewed.DeepCopy())
	m.forget("s")
	empty("after the SidecarSet is deleted", m.of(renewed.DeepCopy()))
}
