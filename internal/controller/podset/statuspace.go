package podset

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// statusCountsInterval is the least time between two status writes of a
// PodSet when the second changes nothing but pod counts (see
// onlyCountsChanged); the second waits for the rest of it.
//
// NOTE: a PodSet status write costs the API server far more than a
// ReplicaSet's: the whole object, its pod template included, is decoded,
// validated against the CRD's schema, converted for managedFields and
// encoded. CPU profiles of the API server during a 0 -> 1,000 scale-up
// (benchmark item 2b) put about 0.7 s in the PodSet's status writes, about
// 50 of them, one per reconcile, on a 2-CPU machine where the scale-up took
// 5 s. Pod counts are what change on every pod event; everything a reader
// acts on (generation, revisions, conditions) is written at once.
const statusCountsInterval = time.Second

// statusPacer remembers when each PodSet's status was last written by this
// process.
type statusPacer struct {
	mu   sync.Mutex
	last map[string]statusWrite // by PodSet key
}

type statusWrite struct {
	uid types.UID
	at  time.Time
}

// wait is how long a counts-only status write of the PodSet key (with uid)
// must still wait at now: 0 once statusCountsInterval has passed since the
// last write, or when this process has not written that PodSet's status
// (a new PodSet, or one of the same name).
func (p *statusPacer) wait(key string, uid types.UID, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.last[key]
	if !ok || w.uid != uid {
		return 0
	}
	return max(w.at.Add(statusCountsInterval).Sub(now), 0)
}

// wrote records a status write of the PodSet key at now.
func (p *statusPacer) wrote(key string, uid types.UID, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[string]statusWrite{}
	}
	p.last[key] = statusWrite{uid: uid, at: now}
}

// forget drops what is remembered of the PodSet key.
func (p *statusPacer) forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, key)
}

// onlyCountsChanged reports whether next differs from prev in nothing but
// what moves with every pod event: the replica counts, podNames, the time
// of the last progress, and the messages of conditions (which quote the
// counts). A change of generation, revision, selector, blocked pods, or of
// any condition's status, reason or observedGeneration is not one.
func onlyCountsChanged(prev, next *deckhandv1alpha1.PodSetStatus) bool {
	return equality.Semantic.DeepEqual(withoutCounts(prev), withoutCounts(next))
}

func withoutCounts(st *deckhandv1alpha1.PodSetStatus) *deckhandv1alpha1.PodSetStatus {
	out := st.DeepCopy()
	out.Replicas, out.FullyLabeledReplicas, out.ReadyReplicas, out.AvailableReplicas = 0, 0, 0, 0
	out.TerminatingReplicas, out.UpdatedReplicas = 0, 0
	out.PodNames = nil
	out.LastProgressTime = nil
	for i := range out.Conditions {
		out.Conditions[i].Message = ""
		out.Conditions[i].LastTransitionTime = metav1.Time{}
	}
	return out
}
