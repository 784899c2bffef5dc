package main

import (
	"fmt"
	"image/color"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// A spread chart shows repeated runs side by side: for each group (a
// figure, or a workload), one bar per workload up to the median of its runs,
// and every run as a point on it, so that the spread is seen next to the
// median the report judges.
type spreadChart struct {
	title, yLabel string
	groups        []spreadGroup
}

type spreadGroup struct {
	name string
	bars []spreadBar
}

// spreadBar is one workload's runs of one figure.
type spreadBar struct {
	series string
	runs   []float64
}

// median is the median of xs; of an even count, the mean of the two middle
// values (as hack/bench reports it).
func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[n/2]
}

// seriesColor gives each workload the same colour in every chart.
func seriesColor(name string, i int) color.Color {
	switch name {
	case seriesDeckhand, kindPodSet:
		return color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	case seriesKruise:
		return color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	case seriesMinimal, kindReplicaSet:
		return color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
	case seriesNone, kindPlain:
		return color.RGBA{R: 0xc7, G: 0xc7, B: 0xc7, A: 0xff}
	}
	palette := []color.Color{
		color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
		color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
	}
	return palette[i%len(palette)]
}

// faded is c at a third of its opacity: the bar behind the run points.
func faded(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	const a = 0x55
	return color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: a}
}

func (c spreadChart) plot() (*plot.Plot, error) {
	p := newPlot(c.title)
	p.Y.Label.Text = c.yLabel
	p.Y.Min = 0
	widest := 0
	var names []string
	for _, g := range c.groups {
		names = append(names, g.name)
		widest = max(widest, len(g.bars))
	}
	p.NominalX(names...)
	p.X.Min, p.X.Max = -0.5, float64(len(c.groups))-0.5
	// A group's bars share 80% of its width; a bar fills 80% of its share
	// and its run points spread over half of the bar.
	share := 0.8 / float64(widest)
	half := share * 0.4
	type drawn struct {
		bars   []plotter.XYer
		points plotter.XYs
	}
	bySeries := map[string]*drawn{}
	var order []string
	top := 0.0
	for i, g := range c.groups {
		for j, b := range g.bars {
			if len(b.runs) == 0 {
				continue
			}
			d := bySeries[b.series]
			if d == nil {
				d = &drawn{}
				bySeries[b.series] = d
				order = append(order, b.series)
			}
			x := float64(i) + (float64(j)-float64(len(g.bars)-1)/2)*share
			m := median(b.runs)
			d.bars = append(d.bars, plotter.XYs{{X: x - half, Y: 0}, {X: x + half, Y: 0}, {X: x + half, Y: m}, {X: x - half, Y: m}})
			for k, y := range b.runs {
				dx := 0.0
				if len(b.runs) > 1 {
					dx = (float64(k)/float64(len(b.runs)-1) - 0.5) * half
				}
				d.points = append(d.points, plotter.XY{X: x + dx, Y: y})
				top = max(top, y)
			}
		}
	}
	p.Y.Max = headroom(top)
	for j, name := range order {
		d, col := bySeries[name], seriesColor(name, j)
		poly, err := plotter.NewPolygon(d.bars...)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		poly.Color = faded(col)
		poly.LineStyle = draw.LineStyle{Color: col, Width: vg.Points(1)}
		sc, err := plotter.NewScatter(d.points)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: darker(col), Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
		p.Add(poly, sc)
		// With one bar a group the x axis already names each workload.
		if widest > 1 {
			p.Legend.Add(name, poly)
		}
	}
	p.Legend.Add("one run (bar: the median of the runs)", runGlyph())
	return p, nil
}

// darker is c at two thirds of its brightness: run points stay visible on
// their bar.
func darker(c color.Color) color.Color {
	r, g, b, _ := c.RGBA()
	return color.RGBA{R: uint8(r >> 8 * 2 / 3), G: uint8(g >> 8 * 2 / 3), B: uint8(b >> 8 * 2 / 3), A: 0xff}
}

func runGlyph() plot.Thumbnailer {
	return &plotter.Scatter{GlyphStyle: draw.GlyphStyle{Color: color.Black, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}}
}

func newPlot(title string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(6)
	p.Legend.Top = true
	p.Legend.Left = false
	p.Y.Tick.Marker = roundTicks{}
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	p.Add(grid)
	return p
}

// headroom is the top of a y axis whose largest value is top: the legend,
// drawn in the top right corner, gets the upper part to itself.
func headroom(top float64) float64 { return top * 1.45 }
