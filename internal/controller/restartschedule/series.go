package restartschedule

import (
	"cmp"
	"iter"
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
//
// A schedule's series are updated in place: the reconciles of one schedule
// never run at once, and each reads its series only until it returns.
// Rebuilding them every evaluation (a new map, and the evaluation's
// samples in a map of their own) was, in its heap profile at 50,000 pods,
// most of what a memory trigger held.
type seriesStore struct {
	mu sync.Mutex
	m  map[types.UID]*scheduleSeries
}

type scheduleSeries struct {
	// generation of the schedule the series were kept for: an edit may
	// renumber the triggers, so it starts them again.
	generation int64
	at         time.Time
	// pass numbers the updates; a series not observed in the latest one
	// is dropped.
	pass   uint32
	series seriesSet
}

// seriesSet is a schedule's series by key.
type seriesSet map[seriesKey]series

// series is one series' samples, oldest first: buf[start:]. Samples that
// leave the window are dropped from the front by moving start; an append
// that finds buf full moves the kept samples back to its front when at
// least half as many were dropped, or else to a new buf half as large
// again as what is kept. buf stays within 1.5 times the most the series
// has kept, and each sample is moved about twice on average.
type series struct {
	buf   []point
	start int32
	pass  uint32
}

// points are the series' samples, oldest first.
func (s series) points() []point { return s.buf[s.start:] }

// add appends v (when it is newer than the latest sample) and drops the
// samples before from and past maxSeriesPoints.
func (s *series) add(v point, from int32) {
	if n := len(s.buf); n == 0 || v.at > s.buf[n-1].at {
		if len(s.buf) == cap(s.buf) {
			kept := s.points()
			if int(s.start) >= len(kept)/2 && s.start > 0 {
				s.buf = s.buf[:copy(s.buf, kept)]
			} else {
				s.buf = append(make([]point, 0, len(kept)+len(kept)/2+1), kept...)
			}
			s.start = 0
		}
		s.buf = append(s.buf, v)
	}
	kept := s.points()
	// Oldest first: the samples before the window are a prefix.
	old, _ := slices.BinarySearchFunc(kept, from, func(p point, t int32) int { return cmp.Compare(p.at, t) })
	s.start += int32(max(old, len(kept)-maxSeriesPoints))
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
// returns them. A series is kept only while its pod is observed (a pod
// gone, a failed read or a pod missing from an answer starts it again),
// and only its samples of the last window(trigger). A sample at the time
// of the previous one (a metrics list reused) is not added twice.
//
// The returned set is the store's own, read-only, and valid until the
// next update of the same schedule.
func (s *seriesStore) update(uid types.UID, generation int64, now time.Time, observed iter.Seq2[seriesKey, point], window func(trigger int) time.Duration) seriesSet {
	s.mu.Lock()
	for id, ss := range s.m {
		if id != uid && now.Sub(ss.at) > forgetAfter {
			delete(s.m, id)
		}
	}
	if s.m == nil {
		s.m = map[types.UID]*scheduleSeries{}
	}
	ss := s.m[uid]
	if ss == nil || ss.generation != generation {
		ss = &scheduleSeries{generation: generation, series: seriesSet{}}
		s.m[uid] = ss
	}
	ss.at = now
	// The schedule's own series are not shared with other reconciles.
	s.mu.Unlock()
	ss.pass++
	for k, v := range observed {
		e := ss.series[k]
		e.add(v, seriesSeconds(now.Add(-window(k.trigger))))
		e.pass = ss.pass
		ss.series[k] = e
	}
	for k, e := range ss.series {
		if e.pass != ss.pass {
			delete(ss.series, k)
		}
	}
	return ss.series
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
func observeSeries(in needInput) iter.Seq2[seriesKey, point] {
	return func(yield func(seriesKey, point) bool) {
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
								if !yield(seriesKey{trigger: i, pod: p.Name, container: ctr.Name}, pointAt(u.At, float64(ws))) {
									return
								}
							}
						}
					case t.Query != nil:
						if v, ok := in.queried[i].values[p.Name]; ok {
							if !yield(seriesKey{trigger: i, pod: p.Name}, pointAt(in.now, v)) {
								return
							}
						}
					}
				}
			}
		}
	}
}
