package sidecarset

import (
	corev1 "k8s.io/api/core/v1"
)

// classifyCache keeps one SidecarSet's podStates from its last reconcile
// (setMemory.classified), by the cached pod they were computed from. The informer cache replaces a
// Pod object when the pod changes and never changes one in place, so an
// entry found under the same object is for an unchanged pod. A podState is
// a function of the pod and of the SidecarSet's spec (its UID keys the
// SidecarSet's memory, its generation the cache), except while a resize is under way, which
// reads the clock and the refused resizes: so a reconcile classifies again
// only the pods that changed since the last one, and the ones resizing.
//
// NOTE: at 50,000 matched pods classify was three quarters of a reconcile's
// CPU (a profile of the manager in the scale benchmark, docs/benchmarks.md
// item 8): each pod's annotations, conditions, owners and container
// statuses sit in memory of their own, and reading them misses the CPU
// caches. Keyed by the object, an unchanged pod costs one map lookup of a
// pointer, without reading the pod at all.
type classifyCache struct {
	generation int64
	// epoch counts reconciles; an entry not seen in the current one is for
	// a pod that changed or left the selection.
	epoch uint32
	byPod map[*corev1.Pod]*cachedPodState
}

type cachedPodState struct {
	state podState
	epoch uint32
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
		e := c.byPod[p]
		switch {
		case e == nil:
			e = &cachedPodState{}
			c.byPod[p] = e
			classify(in, p, &e.state)
		case !reuse || e.state.resize != resizeNone:
			classify(in, p, &e.state)
		default:
			e.state.pending = false
		}
		e.epoch = c.epoch
		out[i] = &e.state
	}
	if len(c.byPod) > len(pods) {
		for p, e := range c.byPod {
			if e.epoch != c.epoch {
				delete(c.byPod, p)
			}
		}
	}
	return out
}
