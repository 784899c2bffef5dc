package restartschedule

import (
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
	var got map[seriesKey][]point
	for i := range maxSeriesPoints + 50 {
		now := start.Add(time.Duration(i) * 15 * time.Second)
		got = s.update("uid", 1, now, map[seriesKey]point{k: {at: now}}, func(int) time.Duration { return 24 * time.Hour })
	}
	if n := len(got[k]); n != maxSeriesPoints {
		t.Fatalf("series holds %d samples, want %d", n, maxSeriesPoints)
	}
	if want := start.Add(time.Duration(maxSeriesPoints+49) * 15 * time.Second); !got[k][maxSeriesPoints-1].at.Equal(want) {
		t.Errorf("newest sample at %v, want %v", got[k][maxSeriesPoints-1].at, want)
	}
}

// TestSeriesReturnedAreNotOverwritten: the series an evaluation got keep
// their samples while later updates append to and trim the same series.
func TestSeriesReturnedAreNotOverwritten(t *testing.T) {
	var s seriesStore
	k := seriesKey{pod: "p", container: "app"}
	start := time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)
	window := func(int) time.Duration { return time.Minute }
	var held [][]point
	var want [][]point
	for i := range 40 {
		now := start.Add(time.Duration(i) * 15 * time.Second)
		got := s.update("uid", 1, now, map[seriesKey]point{k: {at: now, value: float64(i)}}, window)
		held = append(held, got[k])
		want = append(want, append([]point(nil), got[k]...))
		if first := got[k][0].at; first.Before(now.Add(-time.Minute)) {
			t.Fatalf("at %v the series starts at %v, before its window", now, first)
		}
	}
	for i := range held {
		if !slices.Equal(held[i], want[i]) {
			t.Fatalf("the series of evaluation %d changed after it: %v, was %v", i, held[i], want[i])
		}
	}
}
