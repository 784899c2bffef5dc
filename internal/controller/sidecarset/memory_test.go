package sidecarset

import (
	"context"
	"testing"
	"time"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
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

// TestGateClosesWaitForTheCache: a pass of an in-place rollout closes the
// gates of as many pods as maxUnavailable allows. Meanwhile two other pods
// were labelled to go first (the priority strategy), and the next pass
// reads a cache that shows the labels but not yet the closes, which came
// after them. Acting on that cache, the pass would count every pod
// available and close the gates of the two pods labelled first as well. It
// must wait until the cache shows the closes, and then close none.
func TestGateClosesWaitForTheCache(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	f := newInPlaceRollout(now, "p-a", "p-b", "p-c", "p-d", "p-e", "p-f")
	ctx := context.Background()
	beforeLabels := snapshot(ctx, t, f.live)
	f.label(ctx, t, "first", "yes", "p-e", "p-f")
	withoutCloses := snapshot(ctx, t, f.live)

	f.pass(ctx, t, beforeLabels, now)
	if got := testutil.ClosedGates(ctx, t, f.live); len(got) != 2 || got[0] != "p-a" || got[1] != "p-b" {
		t.Fatalf("the first pass closed the gates of %v, want p-a and p-b", got)
	}
	f.pass(ctx, t, withoutCloses, now.Add(2*time.Second))
	if got := testutil.ClosedGates(ctx, t, f.live); len(got) != 2 {
		t.Fatalf("a pass on a cache without the first pass's gate closes closed the gates of %v: more than maxUnavailable 2", got)
	}
	f.pass(ctx, t, f.live, now.Add(3*time.Second))
	if pending := f.r.memory.updates.PendingUpdates(f.set.Name); len(pending) > 0 {
		t.Fatalf("the cache shows the gate closes, expectations still pending: %v", pending)
	}
	if got := testutil.ClosedGates(ctx, t, f.live); len(got) != 2 {
		t.Fatalf("a pass on a cache that shows two gates closed closed the gates of %v, want only those two", got)
	}
}
