package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fixture is testdata/results.json (hack/bench's raw results, cut down to
// three runs a variant and five creates a pod count, and a leaking fleet of
// a few pods over three short days) with edit applied.
func fixture(t *testing.T, edit func(raw map[string]any)) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/results.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc["raw"].(map[string]any))
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writeReport writes a report naming the raw results data, as hack/bench
// writes them, into a fresh folder, and returns the report's path.
func writeReport(t *testing.T, data []byte) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bench-data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bench-data", "20261125T085844Z-abc1234.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(dir, "benchmarks.md")
	md := "# Benchmarks\n\n## Method and machine\n\n- Source: commit abc1234.\n" +
		"- Raw results (every repeat, the summary rows, source and machine): [bench-data/20261125T085844Z-abc1234.json](bench-data/20261125T085844Z-abc1234.json).\n"
	if err := os.WriteFile(report, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	return report
}

// svgTexts is every text element of a well-formed SVG, in order.
func svgTexts(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	dec := xml.NewDecoder(bytes.NewReader(data))
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return texts
		}
		if err != nil {
			t.Fatalf("%s is not well-formed XML: %v", path, err)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			inText = x.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, string(x))
			}
		case xml.EndElement:
			inText = false
		}
	}
}

func TestRenderDrawsWhatTheRunMeasured(t *testing.T) {
	const caption = "run 2026-11-25 08:58Z, commit abc1234"
	workloads := []string{seriesNone, seriesMinimal, seriesDeckhand, seriesKruise}
	full := map[string][]string{
		"admission-throughput.svg": append([]string{"creates/s", caption}, workloads...),
		"admission-latency.svg":    append([]string{"ms", caption}, workloads...),
		"memory.svg":               {"Manager memory with 10000 pods (item 3), each run", caption, seriesDeckhand, seriesKruise, "RSS", "RSS, anonymous", "RSS, file-backed", "live heap"},
		"scale-memory.svg":         {caption, "RSS", "heap in use", "live heap", "live heap +1787 B/pod", "10000", "50000"},
		"scale-latency.svg":        {caption, seriesNone, seriesMinimal, seriesDeckhand},
		"podset-limited.svg":       {caption, kindPodSet, kindReplicaSet, "0 -> 1000 pods Ready", "1000 -> 0 pods gone", "seconds"},
		"podset-unlimited.svg":     {caption, kindPodSet, kindReplicaSet, kindPlain, "0 -> 1000 pods Ready", "1000 -> 0 pods gone"},
		"leak-fleet.svg": {caption, "policy none", "policy nightly", "policy need", "simulated hours", "limit", "need policy's threshold (80%)",
			"maintenance window", "a restart", "a pod of a flat leak", "a pod of a slow leak", "a pod of a fast leak"},
	}
	for name, tc := range map[string]struct {
		edit func(raw map[string]any)
		// want are the charts drawn, each with texts it must show;
		// absent, texts none of them may show.
		want   map[string][]string
		absent []string
	}{
		"every item measured": {edit: func(map[string]any) {}, want: full},
		"a quick run: no OpenKruise, no memory item, no item 2a": {
			edit: func(raw map[string]any) {
				delete(raw["admission"].(map[string]any), "OpenKruise, 1 SidecarSet")
				delete(raw, "memory-vs-kruise")
				delete(raw, "podset-a")
			},
			want: map[string][]string{
				"admission-throughput.svg": {seriesNone, seriesMinimal, seriesDeckhand},
				"admission-latency.svg":    {seriesNone, seriesMinimal, seriesDeckhand},
				"scale-memory.svg":         full["scale-memory.svg"],
				"scale-latency.svg":        full["scale-latency.svg"],
				"leak-fleet.svg":           full["leak-fleet.svg"],
				"podset-unlimited.svg":     full["podset-unlimited.svg"],
			},
			absent: []string{seriesKruise},
		},
		"only the admission item": {
			edit: func(raw map[string]any) {
				for _, item := range []string{"memory-vs-kruise", "scale", "leakfleet", "podset-a", "podset-b"} {
					delete(raw, item)
				}
			},
			want: map[string][]string{
				"admission-throughput.svg": full["admission-throughput.svg"],
				"admission-latency.svg":    full["admission-latency.svg"],
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			report := writeReport(t, fixture(t, tc.edit))
			written, err := render(report)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, w := range written {
				got = append(got, filepath.Base(w))
			}
			var want []string
			for file := range tc.want {
				want = append(want, file)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("charts written %v, want %v", got, want)
			}
			for file, texts := range tc.want {
				shown := svgTexts(t, filepath.Join(filepath.Dir(report), chartsDir, file))
				for _, s := range texts {
					if !slices.Contains(shown, s) {
						t.Errorf("%s shows no %q; it shows %q", file, s, shown)
					}
				}
				for _, s := range tc.absent {
					if slices.Contains(shown, s) {
						t.Errorf("%s shows %q, which the run did not measure", file, s)
					}
				}
			}
		})
	}
}

func TestMemoryRunsReadsBothShapes(t *testing.T) {
	want := memoryRuns{"Deckhand": {"rss_bytes": {1, 2}}, "OpenKruise": {"rss_bytes": {3, 4}}}
	for name, data := range map[string]string{
		"figures at the top": `{"Deckhand": {"rss_bytes": [1, 2]}, "OpenKruise": {"rss_bytes": [3, 4]}}`,
		"figures under runs": `{"order": "Deckhand → OpenKruise", "runs": {"Deckhand": {"rss_bytes": [1, 2]}, "OpenKruise": {"rss_bytes": [3, 4]}},
			"spreads": {"Deckhand": {"rss_bytes": {"min": 1, "median": 1.5, "max": 2, "n": 2, "values": [1, 2]}}}, "ratios": {"rss_bytes": {"median": 0.43}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			var got memoryRuns
			if err := json.Unmarshal([]byte(data), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

func TestDataOf(t *testing.T) {
	for name, tc := range map[string]struct {
		report, want string
	}{
		"the report's raw results": {
			report: "## Method\n\n- Source: x.\n- Raw results (every repeat, the summary rows, source and machine): [bench-data/20261125T085844Z-d8bdb1fe9df6.json](bench-data/20261125T085844Z-d8bdb1fe9df6.json).\n- Machine: y.\n",
			want:   "bench-data/20261125T085844Z-d8bdb1fe9df6.json",
		},
		"another JSON link is not the raw results": {report: "- Notes: [x](bench-data/other.json)\n"},
		"no raw results": {report: "# Benchmarks\n"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := dataOf([]byte(tc.report))
			if tc.want == "" {
				if err == nil {
					t.Fatalf("got %q, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestFigures(t *testing.T) {
	for name, tc := range map[string]struct{ got, want any }{
		"median of an odd count":          {median([]float64{3, 1, 2}), 2.0},
		"median of an even count":         {median([]float64{4, 1, 3, 2}), 2.5},
		"25th percentile, nearest rank":   {percentile([]float64{5, 1, 4, 2, 3}, 25), 2.0},
		"75th percentile, nearest rank":   {percentile([]float64{5, 1, 4, 2, 3}, 75), 4.0},
		"ticks every 500 up to 2900":      {tickLabels(0, 2900), []string{"0", "500", "1000", "1500", "2000", "2500"}},
		"ticks every 2 ms up to 6.2 ms":   {tickLabels(0, 6.2), []string{"0", "2", "4", "6"}},
		"ticks every 0.5 ms up to 2.9 ms": {tickLabels(0, 2.9), []string{"0.0", "0.5", "1.0", "1.5", "2.0", "2.5"}},
		"ticks from 10000 pods":           {tickLabels(10000, 50000), []string{"10000", "20000", "30000", "40000", "50000"}},
	} {
		t.Run(name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Fatalf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func tickLabels(lo, hi float64) []string {
	var labels []string
	for _, tick := range (roundTicks{}).Ticks(lo, hi) {
		labels = append(labels, tick.Label)
	}
	return labels
}

// chartLink is an image link to a chart in the docs.
var chartLink = regexp.MustCompile(`\(((?:\.\./)*bench-data/charts/[^)\s]+\.svg)\)`)

// chartSources are what the charts committed in docs/bench-data/charts are
// drawn from, relative to docs/: the full run's report, and the raw results
// of runs of single items whose charts that report does not draw.
var chartSources = []string{"benchmarks.md", "bench-data/20261128T022131Z-ca1a13c92eba.json"}

// The committed charts are what their sources draw, no two sources draw
// the same chart, and every chart the docs show is one of them.
func TestCommittedChartsMatchTheirSources(t *testing.T) {
	docs := filepath.Join("..", "..", "docs")
	drawn := map[string]string{}
	for _, source := range chartSources {
		r, _, err := loadResults(filepath.Join(docs, filepath.FromSlash(source)))
		if err != nil {
			t.Fatal(err)
		}
		written, err := renderTo(r, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range written {
			file := filepath.Base(w)
			if other, ok := drawn[file]; ok {
				t.Errorf("%s and %s both draw %s", other, source, file)
			}
			drawn[file] = source
			want, err := os.ReadFile(w)
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(docs, filepath.FromSlash(chartsDir), file))
			if err != nil {
				t.Fatalf("%s is not committed (in hack/benchcharts: go run . --report or --data ../../docs/%s): %v", file, source, err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("docs/%s/%s differs from what docs/%s draws: draw it again (in hack/benchcharts: go run . --report or --data ../../docs/%s)", chartsDir, file, source, source)
			}
		}
	}
	pages, err := filepath.Glob(filepath.Join(docs, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range chartLink.FindAllStringSubmatch(string(text), -1) {
			linked++
			if file := strings.TrimPrefix(m[1], "bench-data/charts/"); drawn[file] == "" {
				t.Errorf("%s shows %s, which none of chartSources draws", filepath.Base(page), m[1])
			}
		}
	}
	if linked == 0 {
		t.Error("no page of docs/ shows a chart")
	}
}
