// Command benchcharts draws the charts of a benchmark report from the raw
// results it names, into the bench-data/charts folder beside the report:
//
//	benchcharts --report docs/benchmarks.md
//	benchcharts --data docs/bench-data/20261127T203849Z-a9b35ce119a9.json
//
// `make bench` and `make bench-quick` run it last. hack/bench's report links
// each chart the run's raw results hold data for.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// chartsDir is where the charts go, relative to the report.
const chartsDir = "bench-data/charts"

func main() {
	report := flag.String("report", "docs/benchmarks.md", "the report whose raw results to draw; the charts go to bench-data/charts beside it")
	data := flag.String("data", "", "raw results to draw instead of a report's (a run of single items written to docs/bench-data); the charts go to charts/ beside them")
	flag.Parse()
	source := *report
	if *data != "" {
		source = *data
	}
	written, err := render(source)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcharts:", err)
		os.Exit(1)
	}
	for _, w := range written {
		fmt.Println("wrote", w)
	}
}

// render draws every chart that the raw results of source have data for,
// into the charts folder beside them, and returns the files written. source
// is a report (.md), which names its raw results, or raw results (.json).
func render(source string) ([]string, error) {
	r, data, err := loadResults(source)
	if err != nil {
		return nil, err
	}
	return renderTo(r, filepath.Join(filepath.Dir(data), "charts"))
}

// loadResults reads the raw results of source and says which file they are.
func loadResults(source string) (*results, string, error) {
	data, err := resultsOf(source)
	if err != nil {
		return nil, "", err
	}
	r, err := readResults(data)
	return r, data, err
}

// resultsOf is the raw results file of source: source itself, or the one a
// report names, relative to the report.
func resultsOf(source string) (string, error) {
	if filepath.Ext(source) == ".json" {
		return source, nil
	}
	md, err := os.ReadFile(source)
	if err != nil {
		return "", err
	}
	rel, err := dataOf(md)
	if err != nil {
		return "", fmt.Errorf("%s: %w", source, err)
	}
	return filepath.Join(filepath.Dir(source), filepath.FromSlash(rel)), nil
}

// renderTo draws every chart r has data for into the folder out.
func renderTo(r *results, out string) ([]string, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, c := range charts {
		f, err := c.draw(r)
		if err != nil {
			return written, fmt.Errorf("%s: %w", c.file, err)
		}
		if f == nil {
			continue
		}
		path := filepath.Join(out, c.file)
		if err := writeSVG(f, path); err != nil {
			return written, fmt.Errorf("%s: %w", c.file, err)
		}
		written = append(written, path)
	}
	return written, nil
}

func init() {
	// Sans-serif reads better at a chart's small sizes than the default
	// serif face.
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
}

// The text is laid out with Liberation Sans' metrics, which Arial and
// Helvetica share: a viewer without Liberation Sans falls back to one of
// them and the labels keep their places.
var (
	liberationSans = []byte("font-family:Liberation Sans;")
	sansFallback   = []byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")
)

// The charts' size: as wide as a rendered page's text, one plot high.
const width, height = 16 * vg.Centimeter, 10 * vg.Centimeter

// panelHeight is the height of each plot of a figure of several, the key
// below them included.
const panelHeight = 7 * vg.Centimeter

func writeSVG(f figure, path string) error {
	h := height
	if s, ok := f.(interface{ panels() int }); ok {
		h = vg.Length(s.panels()) * panelHeight
	}
	c := vgsvg.New(width, h)
	f.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return err
	}
	return os.WriteFile(path, bytes.ReplaceAll(b.Bytes(), liberationSans, sansFallback), 0o644)
}
