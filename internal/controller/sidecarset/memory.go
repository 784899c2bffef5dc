package sidecarset

import (
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/revisionhistory"
)

// memory is everything the reconciler keeps between reconciles. Per
// SidecarSet (setMemory): the pod states of its last reconcile, how long
// that reconcile took, and its eviction bookkeeping (the pods it evicted,
// the evictions a PodDisruptionBudget refused, the resizes the API server
// refused, the Events already emitted once). Besides: the pod updates it
// expects its cache to show, and the revision numbers it gave.
//
// One expiry rule holds for all of it: what is remembered about a pod
// lasts until the first reconcile of its SidecarSet that no longer finds
// the pod among the SidecarSet's active pods (an evicted pod: until its
// controller has replaced it), and no longer than its bound (an expected
// update: the expectations' TTL; an eviction: evictionReplaceTimeout);
// what is remembered about a SidecarSet lasts while it exists under the
// same UID. Losing all of it (a restart) is safe: see recreateState.
type memory struct {
	mu   sync.Mutex
	sets map[string]*setMemory

	// updates are the pods updated in place and not yet seen at their new
	// revision in the cache, by SidecarSet name and pod UID, and the pods
	// whose in-place update gate was closed and is not yet seen closed, by
	// gateKey (Reconciler.Expectations).
	updates *expectations.Expectations
	// revisionNumbers are the revision numbers this process gave.
	revisionNumbers revisionhistory.Counter
}

// setMemory is what the reconciler keeps about one SidecarSet.
type setMemory struct {
	uid types.UID
	// cost is how long the last reconcile took, in nanoseconds: the pod
	// event handler reads it (podEventDelay).
	cost atomic.Int64

	// NOTE: reconciles of one SidecarSet never overlap (the work queue
	// hands a key to one worker at a time), so what follows needs no lock.

	// classified holds the pod states of the last reconcile.
	classified classifyCache
	// recreates is the eviction and resize bookkeeping.
	recreates recreateState
}

// of returns what is kept about s, starting afresh when s is new or
// replaces a SidecarSet of the same name.
func (m *memory) of(s *deckhandv1alpha1.SidecarSet) *setMemory {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.sets[s.Name]
	if e != nil && e.uid == s.UID {
		return e
	}
	if e != nil && m.updates != nil {
		m.updates.Delete(s.Name) // expected of the SidecarSet this one replaces
	}
	if m.sets == nil {
		m.sets = map[string]*setMemory{}
	}
	e = &setMemory{uid: s.UID, recreates: newRecreateState()}
	m.sets[s.Name] = e
	return e
}

// forget drops everything about the SidecarSet called name, which is gone.
func (m *memory) forget(name string) {
	m.mu.Lock()
	delete(m.sets, name)
	m.mu.Unlock()
	if m.updates != nil {
		m.updates.Delete(name)
	}
	m.revisionNumbers.Forget(name)
}

// observeCost remembers how long a reconcile of the SidecarSet called name
// took.
func (m *memory) observeCost(name string, d time.Duration) {
	m.mu.Lock()
	e := m.sets[name]
	m.mu.Unlock()
	if e != nil {
		e.cost.Store(int64(d))
	}
}

// podEventDelay is how long a pod event of the SidecarSet called name
// waits, at least base: podEventCostFactor times its last reconcile, at
// most maxPodEventDelay.
func (m *memory) podEventDelay(name string, base time.Duration) time.Duration {
	m.mu.Lock()
	e := m.sets[name]
	m.mu.Unlock()
	if e == nil {
		return base
	}
	return max(base, min(maxPodEventDelay, podEventCostFactor*time.Duration(e.cost.Load())))
}

// classifyCache returns the cache of pod states of s, emptied if s's spec
// changed since it was filled; nil for a SidecarSet without a UID or
// generation (not read from an API server), whose pods are classified
// afresh every time.
func (e *setMemory) classifyCache(s *deckhandv1alpha1.SidecarSet) *classifyCache {
	if s.UID == "" || s.Generation == 0 {
		return nil
	}
	c := &e.classified
	if c.byPod == nil || c.generation != s.Generation {
		c.generation = s.Generation
		c.byPod = map[*corev1.Pod]*cachedPodState{}
	}
	return c
}
