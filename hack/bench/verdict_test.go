package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestJudge(t *testing.T) {
	for name, tc := range map[string]struct {
		f    figure
		b    bound
		want verdict
	}{
		"at most, every run below":            {figure{0.45, 0.40, 0.48}, atMost(0.5), verdictMet},
		"at most, every run above":            {figure{0.60, 0.55, 0.70}, atMost(0.5), verdictMissed},
		"at most, median below, a run above":  {figure{0.49, 0.42, 0.51}, atMost(0.5), verdictTie},
		"at most, median above, a run below":  {figure{0.52, 0.47, 0.60}, atMost(0.5), verdictTie},
		"at most, highest run on the bound":   {figure{0.45, 0.40, 0.50}, atMost(0.5), verdictMet},
		"at least, every run above":           {figure{1.7, 1.6, 2.0}, atLeast(1.5), verdictMet},
		"at least, every run below":           {figure{1.2, 1.1, 1.4}, atLeast(1.5), verdictMissed},
		"at least, median above, a run below": {figure{1.67, 1.22, 2.07}, atLeast(1.5), verdictTie},
		"once, met":                           {single(4), atMost(5), verdictMet},
		"once, missed":                        {single(6), atMost(5), verdictMissed},
		"no upper end":                        {figure{0.3, 0.2, math.Inf(1)}, atMost(0.5), verdictTie},
	} {
		if got := judge(tc.f, tc.b); got != tc.want {
			t.Errorf("%s: judge(%+v, %+v) = %s, want %s", name, tc.f, tc.b, got, tc.want)
		}
	}
}

func TestRatioAndDiffFigures(t *testing.T) {
	d, k := spreadOf([]float64{802, 931, 1083, 900}), spreadOf([]float64{523, 558, 657, 560})
	r := ratioFigure(d, k)
	if math.Abs(r.Median-d.Median/k.Median) > 1e-9 || math.Abs(r.Lo-802.0/657) > 1e-9 || math.Abs(r.Hi-1083.0/523) > 1e-9 {
		t.Errorf("ratioFigure = %+v, want median %v, range %v–%v", r, d.Median/k.Median, 802.0/657, 1083.0/523)
	}
	if r := ratioFigure(d, spreadOf([]float64{0, 1})); !math.IsInf(r.Hi, 1) {
		t.Errorf("ratio over a spread reaching zero has upper end %v, want +Inf", r.Hi)
	}
	x := diffFigure(spreadOf([]float64{5, 6, 7}), spreadOf([]float64{4, 4.5, 5}))
	if x.Median != 1.5 || x.Lo != 0 || x.Hi != 3 {
		t.Errorf("diffFigure = %+v, want median 1.5, range 0–3", x)
	}
}

func TestFigureJSON(t *testing.T) {
	b, err := json.Marshal(figure{Median: 0.3, Lo: 0.2, Hi: math.Inf(1)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"hi":null,"lo":0.2,"median":0.3}`; got != want {
		t.Errorf("figure JSON %s, want %s", got, want)
	}
}

func TestReportPrintsVerdicts(t *testing.T) {
	r := newReport(&config{k8sBin: t.TempDir()}, provenance{})
	r.target("1", "ratio met", ">= 1.5x", atLeast(1.5), figure{1.8, 1.6, 2.0}, times, "1.80x")
	r.target("1", "ratio whose runs reach across", ">= 1.5x", atLeast(1.5), figure{1.67, 1.22, 2.07}, times, "1.67x")
	r.target("1", "ratio missed", ">= 1.5x", atLeast(1.5), figure{1.2, 1.1, 1.3}, times, "1.20x")
	md := r.markdown()
	for _, want := range []string{
		"| ratio met | >= 1.5x | 1.80x | 1.60x–2.00x | met |",
		"| ratio whose runs reach across | >= 1.5x | 1.67x | 1.22x–2.07x | tie |",
		"| ratio missed | >= 1.5x | 1.20x | 1.10x–1.30x | **missed** |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("summary lacks %q:\n%s", want, md)
		}
	}
}

func TestReportShowsTheChartsOfWhatRan(t *testing.T) {
	for name, tc := range map[string]struct {
		dataLink string
		raw      []string
		// want are the charts shown, in order; none, no Charts section.
		want []string
	}{
		"admission and scale measured": {
			dataLink: "bench-data/20261125T085844Z-d8bdb1fe9df6.json", raw: []string{"scale", "admission", "restart"},
			want: []string{"admission-throughput.svg", "admission-latency.svg", "scale-memory.svg", "scale-latency.svg"},
		},
		"nothing with a chart measured":                          {dataLink: "bench-data/x.json", raw: []string{"restart"}},
		"a report on standard output has no raw results to draw": {raw: []string{"admission"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := newReport(&config{k8sBin: t.TempDir()}, provenance{Describe: "d8bdb1f"})
			r.start = time.Date(2026, 11, 25, 8, 58, 44, 0, time.UTC)
			r.dataLink = tc.dataLink
			for _, item := range tc.raw {
				r.record(item, map[string]any{})
			}
			md := r.markdown()
			if len(tc.want) == 0 {
				if strings.Contains(md, "## Charts") || strings.Contains(md, "bench-data/charts/") {
					t.Fatalf("charts shown for a run that has none:\n%s", md)
				}
				return
			}
			section := md[strings.Index(md, "## Charts"):strings.Index(md, "## Method and machine")]
			var shown []string
			for _, line := range strings.Split(section, "\n") {
				if i := strings.Index(line, "](bench-data/charts/"); strings.HasPrefix(line, "![") && i > 0 {
					shown = append(shown, strings.TrimSuffix(line[i+len("](bench-data/charts/"):], ")"))
				}
			}
			if strings.Join(shown, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("charts shown %v, want %v", shown, tc.want)
			}
			if got := strings.Count(section, "Run 2026-11-25T08:58:44Z, commit `d8bdb1f`."); got != len(tc.want) {
				t.Fatalf("%d of %d charts say which run and commit they show:\n%s", got, len(tc.want), section)
			}
		})
	}
}
