package eviction

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Record is one eviction a controller asked for: when, and what the caller
// keeps with it.
type Record[T any] struct {
	At   time.Time
	Info T
}

// Pods is the evictions one owner asked for and has not seen done yet, by
// pod UID. It is a plain map: an owner whose reconciles never overlap keeps
// one without a lock.
type Pods[T any] map[types.UID]Record[T]

// Sweep applies the one expiry rule of an eviction record: it lasts until
// done reports the eviction done (the cache shows the pod gone, terminating
// or replaced, as the caller counts it), and no longer than maxAge after it
// was asked for (zero: no bound), so that an eviction whose outcome the
// cache never shows cannot hold its owner back forever. A record past
// maxAge is forgotten without asking done; done sees every other record,
// once, and may count it.
func (p Pods[T]) Sweep(now time.Time, maxAge time.Duration, done func(pod types.UID, r Record[T]) bool) {
	for uid, r := range p {
		if maxAge > 0 && now.Sub(r.At) > maxAge {
			delete(p, uid)
			continue
		}
		if done(uid, r) {
			delete(p, uid)
		}
	}
}

// InFlight is Pods by owner, the object on whose behalf pods were evicted (a
// RestartSchedule, a SidecarSet), for a controller that keeps one store for
// all its objects. Safe for concurrent use; the zero value is ready to use.
type InFlight[T any] struct {
	// MaxAge bounds every record (Pods.Sweep).
	MaxAge time.Duration

	mu     sync.Mutex
	owners map[types.UID]Pods[T]
}

// Add records that pod was evicted for owner at at.
func (f *InFlight[T]) Add(owner, pod types.UID, at time.Time, info T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.owners == nil {
		f.owners = map[types.UID]Pods[T]{}
	}
	if f.owners[owner] == nil {
		f.owners[owner] = Pods[T]{}
	}
	f.owners[owner][pod] = Record[T]{At: at, Info: info}
}

// Sweep sweeps owner's records (Pods.Sweep) and returns those kept, in no
// particular order.
func (f *InFlight[T]) Sweep(owner types.UID, now time.Time, done func(pod types.UID, r Record[T]) bool) []Record[T] {
	f.mu.Lock()
	defer f.mu.Unlock()
	pods := f.owners[owner]
	pods.Sweep(now, f.MaxAge, done)
	if len(pods) == 0 {
		delete(f.owners, owner)
		return nil
	}
	out := make([]Record[T], 0, len(pods))
	for _, r := range pods {
		out = append(out, r)
	}
	return out
}
