package sidecarset

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// classifyCaches holds a classifyCache per SidecarSet, by name.
type classifyCaches struct{ byName sync.Map }

// forSet returns the cache of s, emptied if s's spec changed since it was
// filled; nil for a SidecarSet without a UID or generation (not read from
// an API server), whose pods are classified afresh every time.
//
// NOTE: reconciles of one SidecarSet never overlap (the work queue hands a
// key to one worker at a time), so a cache needs no lock of its own.
func (cs *classifyCaches) forSet(s *deckhandv1alpha1.SidecarSet) *classifyCache {
	if s.UID == "" || s.Generation == 0 {
		return nil
	}
	v, _ := cs.byName.LoadOrStore(s.Name, &classifyCache{})
	c := v.(*classifyCache)
	if c.uid != s.UID || c.generation != s.Generation {
		c.uid, c.generation = s.UID, s.Generation
		c.byUID = map[types.UID]*cachedPodState{}
	}
	return c
}

func (cs *classifyCaches) forget(name string) { cs.byName.Delete(name) }

// classifyCache keeps one SidecarSet's podStates from its last reconcile,
// by pod UID, each with the resourceVersion of the pod it was computed
// from. A podState is a function of the pod and of the SidecarSet's spec
// (its UID and generation key the cache), except while a resize is under
// way, which reads the clock and the refused resizes: so a reconcile
// classifies again only the pods that changed since the last one, and the
// ones resizing.
//
// NOTE: at 50,000 matched pods classify was three quarters of a reconcile's
// CPU (a profile of the manager in the scale benchmark, docs/benchmarks.md
// item 8): each pod's annotations, conditions, owners and container
// statuses sit in memory of their own, and reading them misses the CPU
// caches. A pod unchanged since the last reconcile now costs one lookup.
type classifyCache struct {
	uid        types.UID
	generation int64
	// epoch counts reconciles; an entry not seen in the current one is a
	// pod gone from the selection.
	epoch uint32
	byUID map[types.UID]*cachedPodState
}

type cachedPodState struct {
	state           podState
	resourceVersion string
	epoch           uint32
}

// classifyPods returns the podStates of pods, in order. c may be nil.
func (c *classifyCache) classifyPods(in classifyInput, pods []*corev1.Pod) []*podState {
	out := make([]*podState, len(pods))
	if c == nil {
		states := make([]podState, len(pods))
		for i, p := range pods {
			classify(in, p, &states[i])
			out[i] = &states[i]
		}
		return out
	}
	c.epoch++
	// A refused resize changes how a pod behind the latest revision is
	// classified without a change of the pod.
	reuse := len(in.resizeRefused) == 0
	for i, p := range pods {
		e := c.byUID[p.UID]
		switch {
		case e == nil:
			e = &cachedPodState{}
			c.byUID[p.UID] = e
		case reuse && p.ResourceVersion != "" && e.resourceVersion == p.ResourceVersion && !e.state.resizeOwned:
			// The cache may hold a new copy of an unchanged pod (after a
			// relist): the state points at the current one.
			e.state.pod, e.state.pending = p, false
			e.epoch = c.epoch
			out[i] = &e.state
			continue
		}
		classify(in, p, &e.state)
		e.resourceVersion, e.epoch = p.ResourceVersion, c.epoch
		out[i] = &e.state
	}
	if len(c.byUID) > len(pods) {
		for uid, e := range c.byUID {
			if e.epoch != c.epoch {
				delete(c.byUID, uid)
			}
		}
	}
	return out
}
