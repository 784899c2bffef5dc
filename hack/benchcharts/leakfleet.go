package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// leakFleet is hack/bench's raw result of the restart-on-need item: one
// fleet of leaking pods under each restart policy, time compressed.
type leakFleet struct {
	Plan struct {
		// SimulatedDay is the real length of a simulated day, nanoseconds.
		SimulatedDay float64 `json:"simulatedDay"`
		LimitBytes   float64 `json:"limitBytes"`
		// ThresholdPercent is the need policy's memory trigger, percent of
		// the limit.
		ThresholdPercent float64 `json:"thresholdPercentOfLimit"`
		Workloads        []struct {
			Name  string `json:"name"`
			Class string `json:"class"`
		} `json:"workloads"`
	} `json:"plan"`
	// Windows are the nights' maintenance windows, [open, close) in
	// seconds since day 0.
	Windows  [][2]float64 `json:"windowsSeconds"`
	Policies []struct {
		Policy string `json:"policy"`
		Pods   []struct {
			Name     string `json:"pod"`
			Workload string `json:"workload"`
			Memory   []struct {
				T     float64 `json:"t"`
				Bytes float64 `json:"bytes"`
			} `json:"memory"`
		} `json:"pods"`
		Restarts []struct {
			T   float64 `json:"t"`
			Pod string  `json:"pod"`
		} `json:"restarts"`
	} `json:"policies"`
}

// stacked is plots one above the other, sharing the width, over a key of
// legends side by side.
type stacked struct {
	plots []*plot.Plot
	keys  []plot.Legend
}

func (s stacked) Draw(c draw.Canvas) {
	keyHeight := vg.Length(0)
	for _, k := range s.keys {
		keyHeight = max(keyHeight, k.Rectangle(c).Size().Y)
	}
	keyHeight += vg.Points(6)
	plots := draw.Crop(c, 0, 0, keyHeight, 0)
	tiles := draw.Tiles{Rows: len(s.plots), Cols: 1, PadY: vg.Points(8), PadTop: vg.Points(4)}
	rows := make([][]*plot.Plot, len(s.plots))
	for i, p := range s.plots {
		rows[i] = []*plot.Plot{p}
	}
	for i, row := range plot.Align(rows, tiles, plots) {
		s.plots[i].Draw(row[0])
	}
	key := draw.Crop(c, 0, 0, 0, keyHeight-c.Size().Y)
	w := key.Size().X / vg.Length(len(s.keys))
	for i := range s.keys {
		s.keys[i].Draw(draw.Crop(key, vg.Length(i)*w, -(c.Size().X - vg.Length(i+1)*w), 0, 0))
	}
}

// panels is how many plots high the figure is.
func (s stacked) panels() int { return len(s.plots) }

// leakClassColor colours a pod by its workload's leak.
var leakClassColor = map[string]color.Color{
	"flat": color.RGBA{R: 0xa0, G: 0xa0, B: 0xa0, A: 0xff},
	"slow": seriesColor(seriesDeckhand, 0),
	"fast": seriesColor(seriesKruise, 0),
}

var restartGlyph = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(3), Shape: draw.PyramidGlyph{}}

var (
	limitColor  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	windowColor = color.NRGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0x30}
)

// leakFleetMemory draws, for each policy, every pod's memory over the
// simulated days (coloured by its workload's leak), the limit and the need
// policy's threshold, the nights' windows, and a mark where a pod was
// restarted.
func leakFleetMemory(r *results) (figure, error) {
	f := r.Raw.LeakFleet
	if f == nil || len(f.Policies) == 0 || f.Plan.SimulatedDay <= 0 {
		return nil, nil
	}
	class := map[string]string{}
	for _, w := range f.Plan.Workloads {
		class[w.Name] = w.Class
	}
	day := f.Plan.SimulatedDay / 1e9
	hours := func(t float64) float64 { return t / day * 24 }
	limit := f.Plan.LimitBytes / (1 << 20)
	pods, marks := plot.NewLegend(), plot.NewLegend()
	for _, c := range []string{"flat", "slow", "fast"} {
		pods.Add("a pod of a "+c+" leak", &plotter.Line{LineStyle: draw.LineStyle{Color: leakClassColor[c], Width: vg.Points(1.5)}})
	}
	pods.Left, marks.Left = true, true
	var fig stacked
	for i, pol := range f.Policies {
		title := fmt.Sprintf("policy %s", pol.Policy)
		if i == 0 {
			title = "Leaking pods' memory, each policy (restart on need)\n" + r.caption() + "\n" + title
		}
		p := linePlot(title, "", "MiB")
		for _, w := range f.Windows {
			band, err := plotter.NewPolygon(plotter.XYs{{X: hours(w[0]), Y: 0}, {X: hours(w[1]), Y: 0}, {X: hours(w[1]), Y: limit}, {X: hours(w[0]), Y: limit}})
			if err != nil {
				return nil, err
			}
			band.Color, band.Width = windowColor, 0
			p.Add(band)
			if i == 0 && w == f.Windows[0] {
				marks.Add("maintenance window", band)
			}
		}
		at := map[string]plotter.XYs{}
		for _, pod := range pol.Pods {
			xys := make(plotter.XYs, len(pod.Memory))
			for k, m := range pod.Memory {
				xys[k] = plotter.XY{X: hours(m.T), Y: m.Bytes / (1 << 20)}
			}
			at[pod.Name] = xys
			if len(xys) == 0 {
				continue
			}
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", pod.Name, err)
			}
			l.LineStyle = draw.LineStyle{Color: leakClassColor[class[pod.Workload]], Width: vg.Points(0.75)}
			p.Add(l)
		}
		for _, h := range []struct {
			name string
			y    float64
			dash []vg.Length
		}{
			{"limit", limit, nil},
			{fmt.Sprintf("need policy's threshold (%.0f%%)", f.Plan.ThresholdPercent), limit * f.Plan.ThresholdPercent / 100, []vg.Length{vg.Points(4), vg.Points(3)}},
		} {
			l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: h.y}, {X: hours(lastT(f)), Y: h.y}})
			if err != nil {
				return nil, err
			}
			l.LineStyle = draw.LineStyle{Color: limitColor, Width: vg.Points(1), Dashes: h.dash}
			p.Add(l)
			if i == 0 {
				marks.Add(h.name, l)
			}
		}
		var restarts plotter.XYs
		for _, rs := range pol.Restarts {
			restarts = append(restarts, plotter.XY{X: hours(rs.T), Y: valueAt(at[rs.Pod], hours(rs.T))})
		}
		if len(restarts) > 0 {
			sc, err := plotter.NewScatter(restarts)
			if err != nil {
				return nil, err
			}
			sc.GlyphStyle = restartGlyph
			p.Add(sc)
		}
		fig.plots = append(fig.plots, p)
	}
	// One y scale for every policy, the limit and every sample in view;
	// the x axis named once, under the last.
	top := limit * 1.15
	for _, p := range fig.plots {
		top = max(top, p.Y.Max)
	}
	for _, p := range fig.plots {
		p.Y.Max = top
		p.X.Label.Text = ""
	}
	fig.plots[len(fig.plots)-1].X.Label.Text = "simulated hours"
	marks.Add("a restart", &plotter.Scatter{GlyphStyle: restartGlyph})
	fig.keys = []plot.Legend{pods, marks}
	return fig, nil
}

// lastT is the last sample's time of the whole fleet.
func lastT(f *leakFleet) float64 {
	last := 0.0
	for _, pol := range f.Policies {
		for _, pod := range pol.Pods {
			for _, m := range pod.Memory {
				last = max(last, m.T)
			}
		}
	}
	return last
}

// valueAt is the pod's last sample at or before x: its memory when it was
// restarted (0 for a pod with no sample by then).
func valueAt(xys plotter.XYs, x float64) float64 {
	v := 0.0
	for _, xy := range xys {
		if xy.X > x {
			break
		}
		v = xy.Y
	}
	return v
}
