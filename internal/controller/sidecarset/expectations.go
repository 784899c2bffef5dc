package sidecarset

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// updateExpectations remembers the pods the controller updated until its
// cache shows them updated. Without them a pod patched a moment ago would
// still look ready and on the old revision in the cache, and the next pass
// would update more pods than maxUnavailable allows.
type updateExpectations struct {
	mu sync.Mutex
	m  map[string]map[types.UID]string // SidecarSet -> pod -> revision
}

func (e *updateExpectations) expect(sidecarSet string, pod types.UID, revision string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]map[types.UID]string{}
	}
	if e.m[sidecarSet] == nil {
		e.m[sidecarSet] = map[types.UID]string{}
	}
	e.m[sidecarSet][pod] = revision
}

// observe drops the expectations the cached pods satisfy (or that can no
// longer be satisfied: the pod is gone) and returns the pods still pending.
func (e *updateExpectations) observe(sidecarSet string, pods []*corev1.Pod) map[types.UID]bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	exp := e.m[sidecarSet]
	if len(exp) == 0 {
		return nil
	}
	seen := make(map[types.UID]bool, len(exp))
	pending := map[types.UID]bool{}
	for _, p := range pods {
		rev, ok := exp[p.UID]
		if !ok {
			continue
		}
		seen[p.UID] = true
		if hash, _ := sidecarcontrol.RecordedRevisions(p.Annotations, sidecarSet); hash == rev {
			delete(exp, p.UID)
		} else {
			pending[p.UID] = true
		}
	}
	for uid := range exp {
		if !seen[uid] {
			delete(exp, uid)
		}
	}
	return pending
}

func (e *updateExpectations) forget(sidecarSet string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, sidecarSet)
}
