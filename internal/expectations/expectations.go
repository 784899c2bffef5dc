// Package expectations records the creates, deletes and updates a controller
// has just made, so that it does not act again on an informer cache that has
// not yet observed them. It is the controller-runtime equivalent of
// kube-controller-manager's ControllerExpectations (and OpenKruise's
// expectations package) and is safe for concurrent use.
//
// A controller calls ExpectCreations / ExpectDeletions / ExpectUpdates right
// before it writes, lowers the expectation when a write fails (CreationObserved,
// DeletionObserved, UpdateObserved), and lowers it again from its watch event
// handlers when the cache shows the write. Reconcile acts only when Satisfied
// returns true. An expectation older than the TTL (5 minutes by default) is
// considered satisfied, so a missed event can delay a controller but never
// wedge it. Delete forgets an owner when the owner itself is deleted.
package expectations

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultTTL is how long expectations are honoured before they are
// considered satisfied anyway (as in kube-controller-manager).
const DefaultTTL = 5 * time.Minute

// record is one owner's outstanding expectations.
type record struct {
	adds    int
	deletes map[string]struct{}
	updates map[string]string
	// timestamp is when the last expectation was raised; the TTL runs from it.
	timestamp time.Time
}

func (r *record) fulfilled() bool {
	return r.adds <= 0 && len(r.deletes) == 0 && len(r.updates) == 0
}

// Expectations tracks outstanding writes per owner key (usually
// "namespace/name" of the owning object).
type Expectations struct {
	mu    sync.Mutex
	ttl   time.Duration
	clock clock.PassiveClock
	items map[string]*record
}

// Option configures an Expectations.
type Option func(*Expectations)

// WithTTL sets how long expectations are honoured (DefaultTTL otherwise).
func WithTTL(ttl time.Duration) Option { return func(e *Expectations) { e.ttl = ttl } }

// WithClock replaces the real clock, for tests (k8s.io/utils/clock/testing).
func WithClock(c clock.PassiveClock) Option { return func(e *Expectations) { e.clock = c } }

// New returns an empty Expectations.
func New(opts ...Option) *Expectations {
	e := &Expectations{ttl: DefaultTTL, clock: clock.RealClock{}, items: map[string]*record{}}
	for _, o := range opts {
		o(e)
	}
	return e
}

// get returns the owner's record, creating it; an expired record is reset
// first so that stale counts never add to fresh ones. Callers hold mu.
func (e *Expectations) get(owner string) *record {
	r, ok := e.items[owner]
	if !ok || e.expired(r) {
		r = &record{deletes: map[string]struct{}{}, updates: map[string]string{}}
		e.items[owner] = r
	}
	return r
}

// expect applies add to owner's record and restarts the record's TTL.
func (e *Expectations) expect(owner string, add func(r *record)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(owner)
	add(r)
	r.timestamp = e.clock.Now()
}

// observe applies seen to owner's record, when it has one: an observation
// of what was never expected changes nothing.
func (e *Expectations) observe(owner string, seen func(r *record)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.items[owner]; ok {
		seen(r)
	}
}

func (e *Expectations) expired(r *record) bool {
	return e.clock.Now().Sub(r.timestamp) > e.ttl
}

// ExpectCreations records that n creates for owner are about to be issued.
func (e *Expectations) ExpectCreations(owner string, n int) {
	if n <= 0 {
		return
	}
	e.expect(owner, func(r *record) { r.adds += n })
}

// CreationObserved lowers owner's expected creates by one: call it when the
// cache shows a new object, and for every create that failed or was skipped.
func (e *Expectations) CreationObserved(owner string) {
	e.observe(owner, func(r *record) {
		if r.adds > 0 {
			r.adds--
		}
	})
}

// ExpectDeletions records that the objects with the given keys are about to
// be deleted. Deletes are tracked per key, so an object observed first as
// terminating and later as gone is counted once.
func (e *Expectations) ExpectDeletions(owner string, keys ...string) {
	if len(keys) == 0 {
		return
	}
	e.expect(owner, func(r *record) {
		for _, k := range keys {
			r.deletes[k] = struct{}{}
		}
	})
}

// DeletionObserved marks the delete of key as seen (or failed). Keys that
// were not expected are ignored.
func (e *Expectations) DeletionObserved(owner, key string) {
	e.observe(owner, func(r *record) { delete(r.deletes, key) })
}

// ExpectUpdates records that the objects with the given keys are about to be
// updated; each must later be observed with the given value (for example the
// value of a label the update sets).
func (e *Expectations) ExpectUpdates(owner string, want map[string]string) {
	if len(want) == 0 {
		return
	}
	e.expect(owner, func(r *record) {
		for k, v := range want {
			r.updates[k] = v
		}
	})
}

// UpdateObserved reports that key was seen with value. The expectation is
// met when value equals the expected one.
func (e *Expectations) UpdateObserved(owner, key, value string) {
	e.observe(owner, func(r *record) {
		if want, ok := r.updates[key]; ok && want == value {
			delete(r.updates, key)
		}
	})
}

// UpdateAbandoned drops the expected update of key whatever its value: call
// it when the update failed or the object is gone.
func (e *Expectations) UpdateAbandoned(owner, key string) {
	e.observe(owner, func(r *record) { delete(r.updates, key) })
}

// PendingUpdates returns the keys of owner's expected updates and the values
// expected for them; none once the expectations have expired, as Satisfied
// says, so that a controller that waits per object is not wedged either.
func (e *Expectations) PendingUpdates(owner string) map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.items[owner]
	if !ok || e.expired(r) {
		return nil
	}
	out := make(map[string]string, len(r.updates))
	for k, v := range r.updates {
		out[k] = v
	}
	return out
}

// Satisfied reports whether owner may act: every expected write has been
// observed, none was ever raised, or the expectations have expired.
func (e *Expectations) Satisfied(owner string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.items[owner]
	if !ok {
		return true
	}
	return r.fulfilled() || e.expired(r)
}

// Pending returns owner's outstanding creates, deletes and updates (zero
// when none or expired), for logs and tests.
func (e *Expectations) Pending(owner string) (adds, deletes, updates int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.items[owner]
	if !ok || e.expired(r) {
		return 0, 0, 0
	}
	return max(r.adds, 0), len(r.deletes), len(r.updates)
}

// Delete forgets owner's expectations; call it when the owner is deleted.
func (e *Expectations) Delete(owner string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.items, owner)
}
