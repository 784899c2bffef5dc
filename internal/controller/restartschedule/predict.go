package restartschedule

import (
	"math"
	"time"
)

// Bounds of a prediction.
const (
	// minPredictionSamples is the fewest samples, at distinct times, a
	// trend is fitted to: two always fit a line exactly, noise and all.
	minPredictionSamples = 3
	// minFitWindow is the least span of samples kept for a fit, whatever
	// a trigger's `for` (which may be 0s).
	minFitWindow = time.Minute
	// minPredictionSpan is the least time between the first and the latest
	// sample of a fit: over a few seconds, one step (a pod loading a model)
	// reads as a steep trend.
	minPredictionSpan = 30 * time.Second
)

// point is one value of a pod's series (a container's working set, a
// query's value) and when it was observed, in 8 bytes: a series keeps
// every sample of its window (up to maxSeriesPoints) for every pod a
// trigger watches, and with a time.Time and a float64 a point was 32. A
// second is as fine as PodMetrics timestamps are, and a float32's 24-bit
// significand puts a working set of a gibibyte within 64 bytes.
type point struct {
	// at is in seconds since the process started (seriesEpoch): an int32
	// counts 68 years either side.
	at    int32
	value float32
}

// seriesEpoch is the Unix time points count their seconds from.
var seriesEpoch = time.Now().Unix()

// pointAt is the point of value v observed at t.
func pointAt(t time.Time, v float64) point { return point{at: seriesSeconds(t), value: float32(v)} }

// seriesSeconds is t in seconds since seriesEpoch; a t beyond an int32 of
// them (a zero timestamp) is held at its bound.
func seriesSeconds(t time.Time) int32 {
	return int32(min(max(t.Unix()-seriesEpoch, math.MinInt32), math.MaxInt32))
}

// time is when p was observed.
func (p point) time() time.Time { return time.Unix(seriesEpoch+int64(p.at), 0) }

// fitLine fits value = intercept + slope * (t - ref) to the samples by
// least squares, t and ref in seconds, ref the latest sample's time: what
// PromQL's predict_linear does over a range. ok is false with fewer than
// minPredictionSamples samples or when they span less than
// minPredictionSpan.
func fitLine(samples []point) (slope, intercept float64, ref time.Time, ok bool) {
	if len(samples) < minPredictionSamples {
		return 0, 0, time.Time{}, false
	}
	latest, first := samples[0].at, samples[0].at
	for _, s := range samples[1:] {
		latest, first = max(latest, s.at), min(first, s.at)
	}
	if time.Duration(latest-first)*time.Second < minPredictionSpan {
		return 0, 0, time.Time{}, false
	}
	// Centred sums: a constant series gives a slope of exactly 0, with no
	// rounding left over to read as a trend.
	n := float64(len(samples))
	var meanX, meanY float64
	for _, s := range samples {
		meanX += float64(s.at-latest) / n
		meanY += float64(s.value) / n
	}
	var covXY, varX float64
	for _, s := range samples {
		dx := float64(s.at-latest) - meanX
		covXY += dx * (float64(s.value) - meanY)
		varX += dx * dx
	}
	if varX <= 0 {
		return 0, 0, time.Time{}, false
	}
	slope = covXY / varX
	intercept = meanY - slope*meanX
	return slope, intercept, point{at: latest}.time(), true
}

// predictLimitAt is when the trend of samples reaches limit: the fitted
// line's crossing, or the latest sample's time when the line is already at
// or over limit there. ok is false when no line fits or it does not rise:
// a flat or falling series never reaches a limit it is under.
func predictLimitAt(samples []point, limit float64) (time.Time, bool) {
	slope, intercept, ref, ok := fitLine(samples)
	if !ok || slope <= 0 {
		return time.Time{}, false
	}
	secs := (limit - intercept) / slope
	if secs <= 0 {
		return ref, true
	}
	// A century bounds what time.Duration holds and what anyone waits for.
	const horizon = 100 * 365 * 24 * time.Hour
	if secs > horizon.Seconds() || math.IsNaN(secs) {
		return time.Time{}, false
	}
	return ref.Add(time.Duration(secs * float64(time.Second))), true
}
