package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"time"
)

// percentile is the nearest-rank percentile p (0..100] of d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string       { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
func msFloat(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func secs(d time.Duration) string {
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// latencies are measured durations; the raw results have them in
// milliseconds.
type latencies []time.Duration

func (l latencies) MarshalJSON() ([]byte, error) {
	ms := make([]float64, len(l))
	for i, d := range l {
		ms[i] = msFloat(d)
	}
	return json.Marshal(ms)
}

// spread summarises repeated measurements of one figure: every figure with
// repeats is reported as its median with the smallest and largest value, and
// judged on the median.
type spread struct {
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
	// Values are the measurements in the order they were taken.
	Values []float64 `json:"values"`
}

// spreadOf is the spread of xs; the median of an even count is the mean of
// the two middle values.
func spreadOf(xs []float64) spread {
	if len(xs) == 0 {
		return spread{}
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return spread{Min: s[0], Median: med, Max: s[len(s)-1], N: len(s), Values: append([]float64(nil), xs...)}
}

// format prints the spread as "median (min–max, n=N)" with each value
// printed by f.
func (s spread) format(f func(float64) string) string {
	if s.N <= 1 {
		return f(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s, n=%d)", f(s.Median), f(s.Min), f(s.Max), s.N)
}

// msOf is the p-th percentile of millisecond figures, printed.
func msOf(xs []float64, p float64) string {
	d := make([]time.Duration, len(xs))
	for i, x := range xs {
		d[i] = time.Duration(x * float64(time.Millisecond))
	}
	return ms(percentile(d, p))
}

// msOfMean is the mean of xs (milliseconds), formatted as ms formats.
func msOfMean(xs []float64) string {
	if len(xs) == 0 {
		return ms(0)
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return ms(time.Duration(sum / float64(len(xs)) * float64(time.Millisecond)))
}
