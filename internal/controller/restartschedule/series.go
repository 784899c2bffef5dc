package restartschedule

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// seriesKey names one series of values: a memory trigger's container of a
// pod, or a query trigger's pod (container ""), by the trigger's index.
type seriesKey struct {
	trigger        int
	pod, container string
}

// seriesStore keeps, per schedule, the recent values its memory and query
// triggers saw, which their predictions are fitted to. It lives in memory
// only: a restarted manager starts the series again and predicts nothing
// until minPredictionSamples new samples are in, so a crash never makes a
// prediction up. The zero value is ready to use.
type seriesStore struct {
	mu sync.Mutex
	m  map[types.UID]*scheduleSeries
}

type scheduleSeries struct {
	// generation of the schedule the series were kept for: an edit may
	// renumber the triggers, so it starts them again.
	generation int64
	at         time.Time
	series     map[seriesKey][]point
}

// maxSeriesPoints bounds each series whatever the trigger's `for` (up to
// 24h, chosen by whoever writes the schedule): the fit uses the newest
// this many samples, an hour at the metrics' 15-second resolution, so that
// the manager's memory grows with the pods watched, not with `for`.
const maxSeriesPoints = 240

// forgetAfter drops the series of a schedule no reconcile has asked about
// for this long (a deleted schedule).
const forgetAfter = 10 * time.Minute

// update adds this evaluation's samples to the schedule's series and
// returns them, oldest first. A series is kept only while its pod is
// observed (a pod gone, a failed read or a pod missing from an answer
// starts it again), and only its samples of the last window(trigger). A
// sample at the time of the previous one (a metrics list reused) is not
// added twice.
//
// The returned series are read-only and stay valid: a later update only
// appends past their ends or moves them to a new array, never writes over
// a sample a caller holds. Copying them instead cost two slices a pod at
// each evaluation (10,000 pods: 20,000 every 15 seconds).
func (s *seriesStore) update(uid types.UID, generation int64, now time.Time, observed map[seriesKey]point, window func(trigger int) time.Duration) map[seriesKey][]point {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[types.UID]*scheduleSeries{}
	}
	for id, ss := range s.m {
		if id != uid && now.Sub(ss.at) > forgetAfter {
			delete(s.m, id)
		}
	}
	prev := s.m[uid]
	if prev == nil || prev.generation != generation {
		prev = &scheduleSeries{}
	}
	next := &scheduleSeries{generation: generation, at: now, series: make(map[seriesKey][]point, len(observed))}
	for k, v := range observed {
		kept := prev.series[k]
		if n := len(kept); n == 0 || v.at.After(kept[n-1].at) {
			kept = append(kept, v)
		}
		from := now.Add(-window(k.trigger))
		// Oldest first: the samples before the window are a prefix.
		old, _ := slices.BinarySearchFunc(kept, from, func(p point, t time.Time) int { return p.at.Compare(t) })
		kept = kept[old:]
		next.series[k] = kept[max(0, len(kept)-maxSeriesPoints):]
	}
	s.m[uid] = next
	return next.series
}

// fitWindow is how far back a trigger's prediction looks: its `for`, at
// least minFitWindow.
func fitWindow(t deckhandv1alpha1.RestartNeedTrigger) time.Duration {
	var d *time.Duration
	switch {
	case t.Memory != nil && t.Memory.For != nil:
		d = &t.Memory.For.Duration
	case t.Query != nil && t.Query.For != nil:
		d = &t.Query.For.Duration
	}
	if d == nil {
		return max(defaultFor, minFitWindow)
	}
	return max(*d, minFitWindow)
}

// defaultFor is the `for` of memory and query triggers, as the CRD schema
// defaults it.
const defaultFor = 5 * time.Minute

// observeSeries is this evaluation's sample of each series: each memory
// trigger's containers of the target pods (the PodMetrics sample, at its
// own time) and each query trigger's pods (the answer, at now).
func observeSeries(in needInput) map[seriesKey]point {
	out := map[seriesKey]point{}
	for i, t := range in.triggers {
		for _, w := range in.workloads {
			for _, p := range w.pods {
				switch {
				case t.Memory != nil:
					u, ok := in.usage[p.Name]
					if !ok {
						continue
					}
					for _, ctr := range p.Spec.Containers {
						if ws, ok := u.WorkingSet(ctr.Name); ok && (t.Memory.Container == "" || t.Memory.Container == ctr.Name) {
							out[seriesKey{trigger: i, pod: p.Name, container: ctr.Name}] = point{at: u.At, value: float64(ws)}
						}
					}
				case t.Query != nil:
					if v, ok := in.queried[i].values[p.Name]; ok {
						out[seriesKey{trigger: i, pod: p.Name}] = point{at: in.now, value: v}
					}
				}
			}
		}
	}
	return out
}
