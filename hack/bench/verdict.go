package main

// One rule judges every target of the summary: on the median, unless the
// runs' range reaches the target's bound, which makes the row a tie. A
// median that meets a target while some runs miss it says the runs do not
// decide, and the report must not call that met.

import (
	"encoding/json"
	"fmt"
	"math"
)

// bound is a target's limit: the figure must stay at or below it (atMost)
// or at or above it.
type bound struct {
	limit  float64
	atMost bool
}

func atMost(x float64) bound  { return bound{limit: x, atMost: true} }
func atLeast(x float64) bound { return bound{limit: x} }

func (b bound) holds(x float64) bool {
	if b.atMost {
		return x <= b.limit
	}
	return x >= b.limit
}

// figure is what a target judges: the median of the runs and the range the
// runs allow, lo <= median <= hi. A figure measured once has lo = hi.
type figure struct{ Median, Lo, Hi float64 }

// MarshalJSON writes a value without an end (a ratio over a spread reaching
// zero) as null: encoding/json refuses infinities.
func (x figure) MarshalJSON() ([]byte, error) {
	v := func(f float64) any {
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil
		}
		return f
	}
	return json.Marshal(map[string]any{"median": v(x.Median), "lo": v(x.Lo), "hi": v(x.Hi)})
}

// single is a figure measured once: it has no range.
func single(x float64) figure { return figure{Median: x, Lo: x, Hi: x} }

// figure is the median of one side's runs with their smallest and largest
// value as its range.
func (s spread) figure() figure { return figure{Median: s.Median, Lo: s.Min, Hi: s.Max} }

// ratioFigure is a / b: the ratio of the medians, its range every pairing of
// runs the two spreads allow (a's smallest over b's largest to a's largest
// over b's smallest). With b reaching zero or below the ratio has no upper
// end (+Inf); with b's median there, no median either.
func ratioFigure(a, b spread) figure {
	div := func(x, y float64) float64 {
		if y <= 0 {
			return math.Inf(1)
		}
		return x / y
	}
	return figure{Median: div(a.Median, b.Median), Lo: div(a.Min, b.Max), Hi: div(a.Max, b.Min)}
}

// diffFigure is a - b: the difference of the medians, its range a's smallest
// less b's largest to a's largest less b's smallest.
func diffFigure(a, b spread) figure {
	return figure{Median: a.Median - b.Median, Lo: a.Min - b.Max, Hi: a.Max - b.Min}
}

// verdict is a summary row's judgement of its figure against its target.
type verdict string

const (
	verdictMet    verdict = "met"
	verdictMissed verdict = "missed"
	// verdictTie: the median may meet or miss the target, but the range
	// reaches across its bound, so the runs do not decide.
	verdictTie verdict = "tie"
)

// judge is the one judgement of every target: met when the whole range of
// the figure meets the bound, missed when none of it does, a tie when the
// range holds the bound. The median lies inside the range, so a met or
// missed row is met or missed on its median too.
func judge(f figure, b bound) verdict {
	lo, mid, hi := b.holds(f.Lo), b.holds(f.Median), b.holds(f.Hi)
	switch {
	case lo && mid && hi:
		return verdictMet
	case !lo && !mid && !hi:
		return verdictMissed
	default:
		return verdictTie
	}
}

// rangeText prints the figure's range as "lo–hi" with f, or "—" when it
// has none.
func (x figure) rangeText(f func(float64) string) string {
	if x.Lo == x.Hi {
		return "—"
	}
	return fmt.Sprintf("%s–%s", f(x.Lo), f(x.Hi))
}

// times prints a ratio as "1.23x".
func times(x float64) string { return fmt.Sprintf("%.2fx", x) }
