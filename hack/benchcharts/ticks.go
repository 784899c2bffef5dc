package main

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// roundTicks marks four to seven round values (1, 2 or 5 times a power of ten
// apart), each labelled with no more digits than its step needs; gonum's
// default ticks label as few as two values on these charts' y axes.
type roundTicks struct{}

func (roundTicks) Ticks(lo, hi float64) []plot.Tick {
	if hi <= lo {
		return nil
	}
	// The smallest round step that leaves at most six steps between lo
	// and hi.
	pow := math.Pow(10, math.Floor(math.Log10((hi-lo)/6)))
	step := 10 * pow
	for _, m := range []float64{5, 2, 1} {
		if (hi-lo)/(m*pow) <= 6 {
			step = m * pow
		}
	}
	digits := max(0, -int(math.Floor(math.Log10(step))))
	var ticks []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', digits, 64)})
	}
	return ticks
}
