package restartschedule

import (
	"math"
	"testing"
	"time"
)

// The expected crossings are worked by hand: with x the seconds before the
// latest sample, slope = Σ(x-x̄)(y-ȳ) / Σ(x-x̄)², and the line's value at
// the latest sample is ȳ - slope·x̄.
func TestPredictLimitAt(t *testing.T) {
	ref := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	series := func(values ...float64) []point {
		// One sample every 10s, the last at ref.
		out := make([]point, len(values))
		for i, v := range values {
			out[i] = pointAt(ref.Add(-time.Duration(len(values)-1-i)*10*time.Second), v)
		}
		return out
	}
	cases := map[string]struct {
		samples []point
		limit   float64
		// want is the crossing after ref; none means no prediction.
		want time.Duration
		none bool
	}{
		// 1 a second, 120 at ref: 150 is 30s away.
		"rising": {samples: series(90, 100, 110, 120), limit: 150, want: 30 * time.Second},
		// x̄ = -15, ȳ = 115, Σdxdy = 480, Σdx² = 500: slope 0.96, 129.4 at
		// ref; 177.4 is 48/0.96 = 50s away.
		"noisy rising": {samples: series(100, 112, 118, 130), limit: 177.4, want: 50 * time.Second},
		// The line is at 120 at ref, over 115 already.
		"already over the limit": {samples: series(90, 100, 110, 120), limit: 115, want: 0},
		"flat":                   {samples: series(100, 100, 100, 100), limit: 150, none: true},
		"flat at a large value":  {samples: series(268435457.3, 268435457.3, 268435457.3, 268435457.3, 268435457.3, 268435457.3, 268435457.3), limit: 268435457.4, none: true},
		"falling":                {samples: series(130, 120, 110, 100), limit: 150, none: true},
		// ȳ = 106.25, Σdxdy = -125: the trend falls, though the last value
		// is above the first.
		"noisy, falling overall": {samples: series(100, 130, 90, 105), limit: 150, none: true},
		"too few samples":        {samples: series(100, 200), limit: 150, none: true},
		"all at one time":        {samples: []point{pointAt(ref, 1), pointAt(ref, 2), pointAt(ref, 3)}, limit: 150, none: true},
		"a step over 20s":        {samples: series(100, 100, 400), limit: 1000, none: true},
		"beyond a century":       {samples: series(0, 1e-9, 2e-9), limit: 1e9, none: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := predictLimitAt(tc.samples, tc.limit)
			if tc.none {
				if ok {
					t.Fatalf("predicted %s, want no prediction", got.Sub(ref))
				}
				return
			}
			if !ok {
				t.Fatal("no prediction")
			}
			if d := got.Sub(ref) - tc.want; d < -time.Millisecond || d > time.Millisecond {
				t.Fatalf("predicted %s after the latest sample, want %s", got.Sub(ref), tc.want)
			}
		})
	}
}

// TestPointAt: a point keeps its time to the second and a working set of a
// gibibyte to 64 bytes; a zero timestamp is held at the bound, not wrapped
// round to a recent time.
func TestPointAt(t *testing.T) {
	at := time.Date(2026, 11, 27, 10, 0, 0, 900_000_000, time.UTC)
	p := pointAt(at, float64(1<<30+12345))
	if !p.time().Equal(at.Truncate(time.Second)) {
		t.Errorf("time %v, want %v", p.time(), at.Truncate(time.Second))
	}
	if d := math.Abs(float64(p.value) - float64(1<<30+12345)); d > 64 {
		t.Errorf("value off by %.0f bytes", d)
	}
	if z := pointAt(time.Time{}, 0); z.at != math.MinInt32 || z.time().After(at) {
		t.Errorf("a zero time is at %d (%v)", z.at, z.time())
	}
}
