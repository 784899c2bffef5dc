package expectations

import (
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

type fakeClock = clocktesting.FakePassiveClock

func TestExpectations(t *testing.T) {
	const owner = "ns/owner"
	type step func(e *Expectations, c *fakeClock)
	expectCreate := func(n int) step { return func(e *Expectations, _ *fakeClock) { e.ExpectCreations(owner, n) } }
	created := func(e *Expectations, _ *fakeClock) { e.CreationObserved(owner) }
	expectDelete := func(keys ...string) step {
		return func(e *Expectations, _ *fakeClock) { e.ExpectDeletions(owner, keys...) }
	}
	deleted := func(k string) step { return func(e *Expectations, _ *fakeClock) { e.DeletionObserved(owner, k) } }
	expectUpdate := func(k, v string) step {
		return func(e *Expectations, _ *fakeClock) { e.ExpectUpdates(owner, map[string]string{k: v}) }
	}
	updated := func(k, v string) step { return func(e *Expectations, _ *fakeClock) { e.UpdateObserved(owner, k, v) } }
	abandoned := func(k string) step { return func(e *Expectations, _ *fakeClock) { e.UpdateAbandoned(owner, k) } }
	advance := func(d time.Duration) step { return func(_ *Expectations, c *fakeClock) { c.SetTime(c.Now().Add(d)) } }
	forget := func(e *Expectations, _ *fakeClock) { e.Delete(owner) }

	cases := map[string]struct {
		steps     []step
		satisfied bool
		adds      int
		deletes   int
		updates   int
	}{
		"nothing raised":       {satisfied: true},
		"creates pending":      {steps: []step{expectCreate(3), created}, adds: 2},
		"creates all observed": {steps: []step{expectCreate(2), created, created}, satisfied: true},
		"extra observations do not go negative": {
			steps: []step{expectCreate(1), created, created, expectCreate(1)}, adds: 1,
		},
		"creates add up":          {steps: []step{expectCreate(2), expectCreate(3), created}, adds: 4},
		"zero creates is a no-op": {steps: []step{expectCreate(0)}, satisfied: true},
		"deletes pending":         {steps: []step{expectDelete("a", "b"), deleted("a")}, deletes: 1},
		"delete counted once per key": {
			// a pod seen terminating, then gone: two observations, one delete.
			steps: []step{expectDelete("a", "b"), deleted("a"), deleted("a")}, deletes: 1,
		},
		"unexpected delete ignored": {steps: []step{expectDelete("a"), deleted("x")}, deletes: 1},
		"deletes all observed":      {steps: []step{expectDelete("a", "b"), deleted("b"), deleted("a")}, satisfied: true},
		"update needs the right value": {
			steps: []step{expectUpdate("a", "rev2"), updated("a", "rev1")}, updates: 1,
		},
		"update observed":  {steps: []step{expectUpdate("a", "rev2"), updated("a", "rev2")}, satisfied: true},
		"update abandoned": {steps: []step{expectUpdate("a", "rev2"), abandoned("a")}, satisfied: true},
		"mixed pending": {
			steps: []step{expectCreate(1), expectDelete("a"), expectUpdate("b", "r")}, adds: 1, deletes: 1, updates: 1,
		},
		"expired is satisfied": {
			steps: []step{expectCreate(5), advance(DefaultTTL + time.Second)}, satisfied: true,
		},
		"not yet expired": {
			steps: []step{expectCreate(5), advance(DefaultTTL - time.Second)}, adds: 5,
		},
		"raising after expiry starts from zero": {
			steps: []step{expectCreate(5), advance(DefaultTTL + time.Second), expectCreate(1)}, adds: 1,
		},
		"raising refreshes the ttl": {
			steps: []step{expectCreate(1), advance(DefaultTTL - time.Second), expectDelete("a"), advance(2 * time.Second)},
			adds:  1, deletes: 1,
		},
		"forget on owner delete": {steps: []step{expectCreate(5), expectDelete("a"), forget}, satisfied: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			e := New(WithClock(c))
			for _, s := range tc.steps {
				s(e, c)
			}
			if got := e.Satisfied(owner); got != tc.satisfied {
				t.Errorf("Satisfied() = %v, want %v", got, tc.satisfied)
			}
			a, d, u := e.Pending(owner)
			if a != tc.adds || d != tc.deletes || u != tc.updates {
				t.Errorf("Pending() = %d adds, %d deletes, %d updates; want %d, %d, %d", a, d, u, tc.adds, tc.deletes, tc.updates)
			}
		})
	}
}

func TestOwnersAreIndependent(t *testing.T) {
	e := New()
	e.ExpectCreations("ns/a", 1)
	if !e.Satisfied("ns/b") {
		t.Fatal("ns/b has no expectations and must be satisfied")
	}
	e.CreationObserved("ns/b")
	if e.Satisfied("ns/a") {
		t.Fatal("an observation for ns/b must not satisfy ns/a")
	}
}

func TestWithTTL(t *testing.T) {
	c := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	e := New(WithTTL(time.Second), WithClock(c))
	e.ExpectDeletions("o", "k")
	if e.Satisfied("o") {
		t.Fatal("fresh expectation must not be satisfied")
	}
	c.SetTime(c.Now().Add(2 * time.Second))
	if !e.Satisfied("o") {
		t.Fatal("expectation older than the TTL must be satisfied")
	}
}

func TestPendingUpdatesIsACopy(t *testing.T) {
	e := New()
	e.ExpectUpdates("o", map[string]string{"p": "r2"})
	got := e.PendingUpdates("o")
	got["p"] = "changed"
	if e.PendingUpdates("o")["p"] != "r2" {
		t.Fatal("PendingUpdates must return a copy")
	}
	if e.PendingUpdates("none") != nil {
		t.Fatal("unknown owner must have no pending updates")
	}
}

func TestConcurrentUse(t *testing.T) {
	e := New()
	const n = 200
	e.ExpectCreations("o", n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			e.CreationObserved("o")
			_ = e.Satisfied("o")
		})
	}
	wg.Wait()
	if !e.Satisfied("o") {
		t.Fatal("all creations observed concurrently must satisfy the owner")
	}
}

// An update expectation the cache never confirms (its event was lost, or
// the object was changed again before the cache saw it) must stop being
// pending once the TTL has passed, as Satisfied already says: a controller
// that gates per object on PendingUpdates would otherwise wait forever.
func TestPendingUpdatesExpire(t *testing.T) {
	c := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	e := New(WithTTL(time.Minute), WithClock(c))
	e.ExpectUpdates("o", map[string]string{"p": "r2"})
	e.UpdateObserved("o", "p", "r1")
	if got := e.PendingUpdates("o"); len(got) != 1 {
		t.Fatalf("PendingUpdates before the TTL = %v, want p", got)
	}
	c.SetTime(c.Now().Add(time.Minute + time.Second))
	if got := e.PendingUpdates("o"); len(got) != 0 {
		t.Fatalf("PendingUpdates after the TTL = %v, want none", got)
	}
	if !e.Satisfied("o") {
		t.Fatal("Satisfied after the TTL = false")
	}
}
