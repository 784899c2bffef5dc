package sidecarcontrol

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// derivedKey identifies one generation of one SidecarSet object: a
// SidecarSet deleted and created again under its name has another UID, and
// any spec change raises the generation.
type derivedKey struct {
	uid        types.UID
	generation int64
}

func keyOf(s *deckhandv1alpha1.SidecarSet) derivedKey {
	return derivedKey{uid: s.UID, generation: s.Generation}
}

// derivedStore holds the Compiled form of every SidecarSet its informer has
// shown, by name. It is kept current by the informer's events (it is a
// toolscache.ResourceEventHandler): every replica's informer delivers them,
// leader or not, so no controller has to tell the store that a SidecarSet
// changed or went away. An entry is served only for the object it was
// computed from (same name, UID and generation); any other object is
// compiled afresh, so a stale entry is never used even before its event
// arrives (the informer updates its cache before it calls the handlers).
type derivedStore struct {
	mu     sync.RWMutex
	byName map[string]*Compiled
	// allow are the pod metadata allowlists compiled SidecarSets apply.
	allow PodMetadataAllowlists
}

func newDerivedStore(allow PodMetadataAllowlists) *derivedStore {
	return &derivedStore{byName: map[string]*Compiled{}, allow: allow}
}

// get returns the Compiled form of s.
func (st *derivedStore) get(s *deckhandv1alpha1.SidecarSet) *Compiled {
	k := keyOf(s)
	st.mu.RLock()
	c := st.byName[s.Name]
	st.mu.RUnlock()
	if c != nil && c.key == k && cacheable(k) {
		return c
	}
	c = compile(s, st.allow)
	st.put(s.Name, c)
	return c
}

// cacheable: generation 0 is an object that never came from the API server
// (tests build them), whose spec can change under the same key.
func cacheable(k derivedKey) bool { return k.generation != 0 }

// put stores c unless the store already holds a later generation of the
// same object (a reader may hold an older copy than the informer's).
func (st *derivedStore) put(name string, c *Compiled) {
	if !cacheable(c.key) {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if old := st.byName[name]; old != nil && old.key.uid == c.key.uid && old.key.generation >= c.key.generation {
		return
	}
	st.byName[name] = c
}

var _ toolscache.ResourceEventHandler = &derivedStore{}

// OnAdd compiles a SidecarSet the informer shows for the first time.
func (st *derivedStore) OnAdd(obj any, _ bool) {
	if s, ok := obj.(*deckhandv1alpha1.SidecarSet); ok {
		st.get(s)
	}
}

// OnUpdate compiles the new generation of a SidecarSet.
func (st *derivedStore) OnUpdate(_, obj any) {
	if s, ok := obj.(*deckhandv1alpha1.SidecarSet); ok {
		st.get(s)
	}
}

// OnDelete drops what was compiled for a deleted SidecarSet, unless the
// store already holds a newer object of the same name.
func (st *derivedStore) OnDelete(obj any) {
	s, ok := deleted[*deckhandv1alpha1.SidecarSet](obj)
	if !ok {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if c := st.byName[s.Name]; c != nil && c.key.uid == s.UID {
		delete(st.byName, s.Name)
	}
}

// deleted returns the object an informer's OnDelete hands over, unwrapped
// from the tombstone it comes in when the watch missed the deletion.
func deleted[T any](obj any) (T, bool) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	o, ok := obj.(T)
	return o, ok
}

// len is the number of SidecarSets the store holds.
func (st *derivedStore) len() int {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return len(st.byName)
}
