package restartschedule

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// evictionRecord is what an eviction adds to the status and the Events.
type evictionRecord struct {
	workload string
	record   deckhandv1alpha1.RestartRecord
	events   []pendingEvent
}

// recordEviction adds an eviction done in this reconcile to the history,
// the workload's last triggered time and the Events.
func (s *scope) recordEviction(e evictionRecord) {
	s.record(e.record)
	setLastTriggered(&s.rs.Status, e.workload, e.record.StartTime.Time)
	s.events = append(s.events, e.events...)
	s.evictions = append(s.evictions, e)
}

// untoldEvictions keeps, per schedule, the evictions whose status write
// failed: a reconcile that read a cached copy older than its predecessor's
// write is refused with a conflict, and the pods it evicted are gone, so no
// later reconcile would name them. With turns woken by pod readiness,
// reconciles follow each other closely enough for this to happen (seen in
// the leak-fleet benchmark: 2 evictions of 10 in one second without their
// Events). The next reconcile records them. In memory only: a crash between
// an eviction and its status write loses its record (the pod is replaced
// all the same).
type untoldEvictions struct {
	mu sync.Mutex
	m  map[types.UID]untold
}

type untold struct {
	at        time.Time
	evictions []evictionRecord
}

// put replaces the schedule's untold evictions.
func (u *untoldEvictions) put(uid types.UID, now time.Time, evictions []evictionRecord) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[types.UID]untold{}
	}
	for id, e := range u.m {
		if now.Sub(e.at) > forgetAfter {
			delete(u.m, id)
		}
	}
	if len(evictions) == 0 {
		delete(u.m, uid)
		return
	}
	u.m[uid] = untold{at: now, evictions: evictions}
}

// take returns and forgets the schedule's untold evictions.
func (u *untoldEvictions) take(uid types.UID) []evictionRecord {
	u.mu.Lock()
	defer u.mu.Unlock()
	e := u.m[uid]
	delete(u.m, uid)
	return e.evictions
}

// recordUntold records the evictions of uid that an earlier status write
// lost and this status does not hold yet.
func (r *Reconciler) recordUntold(s *scope) {
	for _, e := range r.untold.take(s.rs.UID) {
		if !inHistory(s.rs.Status.History, e.record) {
			s.recordEviction(e)
		}
	}
}

func inHistory(history []deckhandv1alpha1.RestartRecord, rec deckhandv1alpha1.RestartRecord) bool {
	for _, h := range history {
		if h.Pod == rec.Pod && h.Workload == rec.Workload && h.StartTime != nil && rec.StartTime != nil && h.StartTime.Equal(rec.StartTime) {
			return true
		}
	}
	return false
}
