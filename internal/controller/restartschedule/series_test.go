package restartschedule

import (
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
