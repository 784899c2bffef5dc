package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"time"
)

// results is the part of hack/bench's raw results (docs/bench-data/*.json)
// that the charts draw: the run, its source, and the raw figures of the
// items that have a chart. An item the run did not measure is absent.
type results struct {
	Source struct {
		Describe string `json:"describe"`
		Commit   string `json:"commit"`
		Dirty    bool   `json:"dirty"`
	} `json:"source"`
	Quick bool      `json:"quick"`
	Start time.Time `json:"start"`
	Raw   struct {
		// Admission is item 1 by variant (hack/bench admissionRaw).
		Admission map[string]admissionRuns `json:"admission"`
		// Memory is item 3's Deckhand / OpenKruise runs.
		Memory memoryRuns `json:"memory-vs-kruise"`
		// Scale is item 8's pod counts, smallest first.
		Scale []scaleStep `json:"scale"`
		// PodSetLimited and PodSetUnlimited are items 2a and 2b: every
		// scale-up and scale-down run of each workload.
		PodSetLimited   []podSetRun `json:"podset-a"`
		PodSetUnlimited []podSetRun `json:"podset-b"`
		// LeakFleet is item 9, restart on need against a leaking fleet.
		LeakFleet *leakFleet `json:"leakfleet"`
	} `json:"raw"`
}

type admissionRuns struct {
	CreatesPerS  []float64 `json:"creates_per_s"`
	OneClientP50 []float64 `json:"one_client_p50_ms"`
}

// memoryRuns is each manager's figures by name, one value a run:
// {"Deckhand": {"rss_bytes": [...], ...}, "OpenKruise": {...}}.
type memoryRuns map[string]map[string][]float64

// UnmarshalJSON reads both shapes hack/bench has written: the figures at
// the top, or under "runs" beside their spreads and ratios.
func (m *memoryRuns) UnmarshalJSON(data []byte) error {
	var wrapped struct {
		Runs map[string]map[string][]float64 `json:"runs"`
	}
	if err := json.Unmarshal(data, &wrapped); err == nil && wrapped.Runs != nil {
		*m = wrapped.Runs
		return nil
	}
	var flat map[string]map[string][]float64
	if err := json.Unmarshal(data, &flat); err != nil {
		return fmt.Errorf("memory-vs-kruise: %w", err)
	}
	*m = flat
	return nil
}

type podSetRun struct {
	Kind        string  `json:"kind"`
	Pods        int     `json:"pods"`
	UpSeconds   float64 `json:"upSeconds"`
	DownSeconds float64 `json:"downSeconds"`
}

// scaleStep is one pod count of item 8: what each of its two charts
// draws.
type scaleStep struct {
	Pods int `json:"pods"`
	managerMemory
	createLatencies
}

// managerMemory is the manager's memory at one pod count, bytes.
type managerMemory struct {
	RSSBytes       float64 `json:"rssBytes"`
	LiveHeapBytes  float64 `json:"liveHeapBytes"`
	HeapInuseBytes float64 `json:"heapInuseBytes"`
}

// createLatencies are one pod count's one-client creates, milliseconds
// each: through Deckhand's webhook, through none, through the minimal
// injecting one.
type createLatencies struct {
	DeckhandMs  []float64 `json:"oneClientCreateMs"`
	NoWebhookMs []float64 `json:"oneClientCreateNoWebhookMs"`
	MinimalMs   []float64 `json:"oneClientCreateMinimalWebhookMs"`
}

func readResults(path string) (*results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r results
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// rawLink finds the raw results a report names ("Raw results ...:
// [bench-data/X.json](bench-data/X.json)"), relative to the report.
var rawLink = regexp.MustCompile(`(?m)^- Raw results[^\n]*\]\(([^)\s]+\.json)\)`)

// dataOf is the raw results file the report names, relative to it.
func dataOf(report []byte) (string, error) {
	m := rawLink.FindSubmatch(report)
	if m == nil {
		return "", fmt.Errorf("the report names no raw results (a line \"- Raw results ...: [..](bench-data/....json)\")")
	}
	return string(m[1]), nil
}

// caption says which run a chart shows.
func (r *results) caption() string {
	s := fmt.Sprintf("run %s, commit %s", r.Start.UTC().Format("2006-01-02 15:04Z"), r.Source.Describe)
	if r.Source.Dirty {
		s += " (dirty tree)"
	}
	if r.Quick {
		s += ", quick sizes"
	}
	return s
}
