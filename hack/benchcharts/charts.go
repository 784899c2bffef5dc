package main

import (
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The workloads as the charts name them; seriesColor keeps each one's
// colour the same in every chart.
const (
	seriesDeckhand = "Deckhand"
	seriesKruise   = "OpenKruise"
	seriesMinimal  = "minimal injecting webhook"
	seriesNone     = "no webhook"
)

// A chart is one SVG the report links to: file is its name in the charts
// folder; draw returns nil when the run did not measure what it shows.
type chart struct {
	file string
	draw func(r *results) (figure, error)
}

// A figure draws itself onto a canvas: a plot, or plots stacked.
type figure interface {
	Draw(c draw.Canvas)
}

// plotFigure keeps a nil plot a nil figure.
func plotFigure(p *plot.Plot, err error) (figure, error) {
	if p == nil || err != nil {
		return nil, err
	}
	return p, nil
}

// charts is every chart, in the order the report shows them. hack/bench's
// report links the same files (reportCharts in hack/bench/charts.go).
var charts = []chart{
	{"admission-throughput.svg", admissionThroughput},
	{"admission-latency.svg", admissionLatency},
	{"memory.svg", memoryVsKruise},
	{"podset-limited.svg", podSetLimited},
	{"podset-unlimited.svg", podSetUnlimited},
	{"scale-memory.svg", scaleMemory},
	{"scale-latency.svg", scaleLatency},
	{"leak-fleet.svg", leakFleetMemory},
}

// admissionVariants are item 1's variants the charts compare, by the name
// hack/bench records them under, in the order drawn: the API server alone,
// the cheapest webhook that injects the same sidecar, Deckhand, OpenKruise.
var admissionVariants = []struct{ variant, series string }{
	{"no webhook", seriesNone},
	{"null webhook adding the sidecar", seriesMinimal},
	{"1 SidecarSet", seriesDeckhand},
	{"OpenKruise, 1 SidecarSet", seriesKruise},
}

// admissionChart draws one of item 1's per-run figures for each variant
// measured: one bar a variant, named on the x axis.
func admissionChart(r *results, title, yLabel string, runs func(admissionRuns) []float64) (*plot.Plot, error) {
	if len(r.Raw.Admission) == 0 {
		return nil, nil
	}
	c := spreadChart{title: title + "\n" + r.caption(), yLabel: yLabel}
	for _, v := range admissionVariants {
		if a, ok := r.Raw.Admission[v.variant]; ok {
			c.groups = append(c.groups, spreadGroup{name: v.series, bars: []spreadBar{{series: v.series, runs: runs(a)}}})
		}
	}
	return c.plot()
}

func admissionThroughput(r *results) (figure, error) {
	return plotFigure(admissionChart(r, "Pod creates per second, 16 clients (item 1), each run", "creates/s",
		func(a admissionRuns) []float64 { return a.CreatesPerS }))
}

func admissionLatency(r *results) (figure, error) {
	return plotFigure(admissionChart(r, "One-client pod create p50 (item 1), each run", "ms",
		func(a admissionRuns) []float64 { return a.OneClientP50 }))
}

// memoryFigures are item 3's figures drawn, by the name hack/bench
// records them under.
var memoryFigures = []struct{ key, group string }{
	{"rss_bytes", "RSS"},
	{"rss_anon_bytes", "RSS, anonymous"},
	{"rss_file_bytes", "RSS, file-backed"},
	{"heap_alloc_bytes", "live heap"},
}

func memoryVsKruise(r *results) (figure, error) {
	if len(r.Raw.Memory) == 0 {
		return nil, nil
	}
	pods := median(r.Raw.Memory[seriesDeckhand]["pods"])
	c := spreadChart{title: fmt.Sprintf("Manager memory with %.0f pods (item 3), each run\n%s", pods, r.caption()), yLabel: "MiB"}
	for _, f := range memoryFigures {
		g := spreadGroup{name: f.group}
		for _, manager := range []string{seriesDeckhand, seriesKruise} {
			if runs := r.Raw.Memory[manager][f.key]; len(runs) > 0 {
				g.bars = append(g.bars, spreadBar{series: manager, runs: scaled(runs, 1.0/(1<<20))})
			}
		}
		c.groups = append(c.groups, g)
	}
	return plotFigure(c.plot())
}

// The workloads of items 2a and 2b as hack/bench names them, in the order
// drawn.
const (
	kindPodSet     = "PodSet (Deckhand)"
	kindReplicaSet = "ReplicaSet (kube-controller-manager)"
	kindPlain      = "plain client, 32 workers"
)

func podSetLimited(r *results) (figure, error) {
	return plotFigure(podSetChart(r, r.Raw.PodSetLimited, "Scaling 0 -> %d -> 0 pods, client QPS 20/burst 30 (item 2a)"))
}

func podSetUnlimited(r *results) (figure, error) {
	return plotFigure(podSetChart(r, r.Raw.PodSetUnlimited, "Scaling 0 -> %d -> 0 pods, client limits off (item 2b)"))
}

// podSetChart draws the time of each scale-up and scale-down run of each
// workload measured; title takes the pod count.
func podSetChart(r *results, runs []podSetRun, title string) (*plot.Plot, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	up := spreadGroup{name: fmt.Sprintf("0 -> %d pods Ready", runs[0].Pods)}
	down := spreadGroup{name: fmt.Sprintf("%d -> 0 pods gone", runs[0].Pods)}
	for _, kind := range []string{kindPodSet, kindReplicaSet, kindPlain} {
		var ups, downs []float64
		for _, x := range runs {
			if x.Kind == kind {
				ups, downs = append(ups, x.UpSeconds), append(downs, x.DownSeconds)
			}
		}
		if len(ups) > 0 {
			up.bars = append(up.bars, spreadBar{series: kind, runs: ups})
			down.bars = append(down.bars, spreadBar{series: kind, runs: downs})
		}
	}
	c := spreadChart{title: fmt.Sprintf(title, runs[0].Pods) + ", each run\n" + r.caption(), yLabel: "seconds", groups: []spreadGroup{up, down}}
	return c.plot()
}

func scaled(xs []float64, by float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * by
	}
	return out
}

// scaleMemory draws the manager's memory at each of item 8's pod counts,
// each stretch between two counts labelled with the live heap it added per
// pod (the figure item 8 judges over the whole range).
func scaleMemory(r *results) (figure, error) {
	p, steps := scalePlot(r, "Deckhand manager memory against pods cached (item 8)", "pods", "MiB")
	if p == nil {
		return nil, nil
	}
	mib := func(b float64) []float64 { return []float64{b / (1 << 20)} }
	err := drawSteps(p, steps, 0, []stepSeries{
		{"RSS", func(s scaleStep) []float64 { return mib(s.RSSBytes) }},
		{"heap in use", func(s scaleStep) []float64 { return mib(s.HeapInuseBytes) }},
		{"live heap", func(s scaleStep) []float64 { return mib(s.LiveHeapBytes) }},
	})
	if err != nil || len(steps) < 2 {
		return p, err
	}
	var at plotter.XYs
	var text []string
	for k := 1; k < len(steps); k++ {
		a, b := steps[k-1], steps[k]
		perPod := (b.LiveHeapBytes - a.LiveHeapBytes) / float64(b.Pods-a.Pods)
		at = append(at, plotter.XY{X: float64(a.Pods+b.Pods) / 2, Y: (a.LiveHeapBytes + b.LiveHeapBytes) / 2 / (1 << 20)})
		text = append(text, fmt.Sprintf("live heap +%.0f B/pod", perPod))
	}
	labels, err := plotter.NewLabels(plotter.XYLabels{XYs: at, Labels: text})
	if err != nil {
		return nil, err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].XAlign = draw.XCenter
		labels.TextStyle[i].YAlign = draw.YTop
	}
	labels.Offset = vg.Point{Y: -vg.Points(4)}
	p.Add(labels)
	return p, nil
}

// scaleLatency draws the one-client create latency at each pod count
// through Deckhand's webhook, the minimal injecting one and none: the
// median of the probes with the bar from their 25th to 75th percentile.
func scaleLatency(r *results) (figure, error) {
	p, steps := scalePlot(r, "One-client pod create latency against pods cached (item 8)", "pods (median of the creates, bar: 25th to 75th percentile)", "ms")
	if p == nil {
		return nil, nil
	}
	// The series sit a little apart at each count so that their bars do
	// not hide one another.
	nudge := float64(steps[len(steps)-1].Pods) / 150
	return p, drawSteps(p, steps, nudge, []stepSeries{
		{seriesNone, func(s scaleStep) []float64 { return s.NoWebhookMs }},
		{seriesMinimal, func(s scaleStep) []float64 { return s.MinimalMs }},
		{seriesDeckhand, func(s scaleStep) []float64 { return s.DeckhandMs }},
	})
}

// stepSeries is one figure at each pod count: one value, or samples drawn
// as their median with a bar from their 25th to their 75th percentile.
type stepSeries struct {
	name   string
	values func(scaleStep) []float64
}

// drawSteps draws each series against the pod counts, the i-th of them
// moved by (i-1) nudges along x, and leaves the legend its headroom.
func drawSteps(p *plot.Plot, steps []scaleStep, nudge float64, series []stepSeries) error {
	top := 0.0
	for i, s := range series {
		var xys plotter.XYs
		var errs plotter.YErrors
		samples := false
		for _, st := range steps {
			v := s.values(st)
			if len(v) == 0 {
				continue
			}
			m := median(v)
			lo, hi := percentile(v, 25), percentile(v, 75)
			xys = append(xys, plotter.XY{X: float64(st.Pods) + (float64(i)-1)*nudge, Y: m})
			errs = append(errs, struct{ Low, High float64 }{m - lo, hi - m})
			samples = samples || len(v) > 1
			top = max(top, hi)
		}
		if len(xys) == 0 {
			continue
		}
		col := seriesColor(s.name, i)
		if err := addLinePoints(p, s.name, col, xys); err != nil {
			return err
		}
		if !samples {
			continue
		}
		bars, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{xys, errs})
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		bars.Color = col
		p.Add(bars)
	}
	p.Y.Max = headroom(top)
	return nil
}

// scalePlot is the plot of a figure against item 8's pod counts, and the
// counts; nil when the run did not measure item 8.
func scalePlot(r *results, title, xLabel, yLabel string) (*plot.Plot, []scaleStep) {
	if len(r.Raw.Scale) == 0 {
		return nil, nil
	}
	return linePlot(title+"\n"+r.caption(), xLabel, yLabel), r.Raw.Scale
}

// linePlot is a plot of values against a measured x, both axes marked at
// round values, y from 0.
func linePlot(title, xLabel, yLabel string) *plot.Plot {
	p := newPlot(title)
	p.X.Label.Text = xLabel
	p.X.Tick.Marker = roundTicks{}
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	return p
}

// percentile is the p-th percentile of xs, nearest rank.
func percentile(xs []float64, p float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func addLinePoints(p *plot.Plot, name string, col color.Color, xys plotter.XYs) error {
	l, pts, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	l.LineStyle = draw.LineStyle{Color: col, Width: vg.Points(1.5)}
	pts.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(3), Shape: draw.CircleGlyph{}}
	p.Add(l, pts)
	p.Legend.Add(name, l, pts)
	return nil
}
