package restartschedule

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// statusAfterPatchDelay is how long a reconcile that restarted workloads
// waits before the reconcile that records them in the status.
//
// NOTE: when many schedules share a slot, every reconcile at that slot is
// two round trips, the workload patch and the status write. Recording the
// restart in a second reconcile, requeued behind the schedules still due,
// sends every patch of the slot before any status write, so the last
// workload is restarted as soon as a plain client patching them all would
// restart it. A crash in between loses nothing: the workload's restartedAt
// annotation already names the slot, and the next reconcile adopts the
// rollout without patching again.
const statusAfterPatchDelay = time.Millisecond

// patchedWorkloads remembers the workloads a reconcile patched and left to a
// later one to record: the cache may not show the patch yet when the status
// is written, and the Restarting Event belongs to the reconcile that records
// the restart. Forgotten once a schedule's status is written. The zero value
// is ready to use.
type patchedWorkloads struct {
	mu sync.Mutex
	// m maps a schedule to "<workload>@<slot>" to the workload's generation
	// after the patch.
	m map[types.UID]map[string]int64
}

func patchedKey(workload, slot string) string { return workload + "@" + slot }

func (p *patchedWorkloads) remember(schedule types.UID, workload, slot string, generation int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[types.UID]map[string]int64{}
	}
	if p.m[schedule] == nil {
		p.m[schedule] = map[string]int64{}
	}
	p.m[schedule][patchedKey(workload, slot)] = generation
}

// generation reports whether this process patched workload for slot and
// has not recorded it yet, and the generation the patch produced.
func (p *patchedWorkloads) generation(schedule types.UID, workload, slot string) (int64, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.m[schedule][patchedKey(workload, slot)]
	return g, ok
}

func (p *patchedWorkloads) forget(schedule types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, schedule)
}
