package restartschedule

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestSeriesIsBounded: a series keeps at most maxSeriesPoints samples, the
// newest, however long the trigger's window.
func TestSeriesIsBounded(t *testing.T) {
	var s seriesStore
	k := seriesKey{pod: "p", container: "app"}
	start := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	var got seriesSet
	for i := range maxSeriesPoints + 50 {
		now := start.Add(time.Duration(i) * 15 * time.Second)
		got = s.update("uid", 1, now, maps.All(map[seriesKey]point{k: pointAt(now, 0)}), func(int) time.Duration { return 24 * time.Hour })
	}
	pts := got[k].points()
	if n := len(pts); n != maxSeriesPoints {
		t.Fatalf("series holds %d samples, want %d", n, maxSeriesPoints)
	}
	if want := seriesSeconds(start.Add(time.Duration(maxSeriesPoints+49) * 15 * time.Second)); pts[maxSeriesPoints-1].at != want {
		t.Errorf("newest sample at %v, want %v", pts[maxSeriesPoints-1].at, want)
	}
}

// TestSeriesMatchesItsDefinition: through random evaluations (pods coming
// and going, samples reused, missed and late, an edit of the schedule),
// every series holds exactly the samples of its current run of
// observations inside its window, newest maxSeriesPoints, oldest first;
// and the room it takes stays within 1.5 times the most it has held.
func TestSeriesMatchesItsDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var s seriesStore
	window := func(trigger int) time.Duration { return time.Duration(trigger+1) * time.Minute }
	start := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	// want is the definition: each key's run of distinct samples, in
	// the window, as a plain list rebuilt from scratch.
	want := map[seriesKey][]point{}
	most := map[seriesKey]int{}
	generation := int64(1)
	for step := range 3000 {
		now := start.Add(time.Duration(step) * 5 * time.Second)
		if rng.IntN(500) == 0 {
			generation++
			clear(want)
		}
		observed := map[seriesKey]point{}
		for pod := range 6 {
			if rng.IntN(20) == 0 {
				continue // not observed: its series starts again
			}
			k := seriesKey{trigger: pod % 3, pod: fmt.Sprint("p", pod), container: "app"}
			at := now.Add(-time.Duration(rng.IntN(3)) * 5 * time.Second)
			observed[k] = pointAt(at, rng.Float64())
		}
		for k := range want {
			if _, ok := observed[k]; !ok {
				delete(want, k)
			}
		}
		for k := range most {
			if _, ok := want[k]; !ok {
				delete(most, k)
			}
		}
		for k, v := range observed {
			w := want[k]
			if n := len(w); n == 0 || v.at > w[n-1].at {
				w = append(w, v)
			}
			from := seriesSeconds(now.Add(-window(k.trigger)))
			w = slices.DeleteFunc(w, func(p point) bool { return p.at < from })
			want[k] = w[max(0, len(w)-maxSeriesPoints):]
			most[k] = max(most[k], len(want[k]))
		}
		got := s.update("uid", generation, now, maps.All(observed), window)
		if len(got) != len(want) {
			t.Fatalf("step %d: %d series, want %d", step, len(got), len(want))
		}
		for k, w := range want {
			e := got[k]
			if !slices.Equal(e.points(), w) {
				t.Fatalf("step %d: %v holds %v, want %v", step, k, e.points(), w)
			}
			if limit := most[k] + most[k]/2 + 1; cap(e.buf) > max(limit, 2) {
				t.Fatalf("step %d: %v has held at most %d samples, in room for %d", step, k, most[k], cap(e.buf))
			}
		}
	}
}

// TestSeriesUpdateReusesItsMemory: once each series has filled its window,
// an evaluation allocates nothing per series: as often with 1,000 pods as
// with 10.
func TestSeriesUpdateReusesItsMemory(t *testing.T) {
	allocs := func(pods int) float64 {
		var s seriesStore
		observed := map[seriesKey]point{}
		for i := range pods {
			observed[seriesKey{pod: fmt.Sprint("p", i), container: "app"}] = point{}
		}
		now := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
		window := func(int) time.Duration { return 2 * time.Minute }
		evaluate := func() {
			now = now.Add(15 * time.Second)
			for k := range observed {
				observed[k] = pointAt(now, 1)
			}
			s.update("uid", 1, now, maps.All(observed), window)
		}
		for range 40 {
			evaluate()
		}
		return testing.AllocsPerRun(20, evaluate)
	}
	if few, many := allocs(10), allocs(1000); many > few {
		t.Errorf("an evaluation of 1,000 filled series allocated %.0f times, of 10 series %.0f", many, few)
	}
}
