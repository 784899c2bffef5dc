package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSpreadOf(t *testing.T) {
	for _, tc := range []struct {
		in               []float64
		min, median, max float64
	}{
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 1, 3, 5},
		{[]float64{4, 1, 3, 2}, 1, 2.5, 4},
	} {
		s := spreadOf(tc.in)
		if s.Min != tc.min || s.Median != tc.median || s.Max != tc.max || s.N != len(tc.in) {
			t.Errorf("spreadOf(%v) = %+v, want min %v median %v max %v", tc.in, s, tc.min, tc.median, tc.max)
		}
		if !reflect.DeepEqual(s.Values, tc.in) {
			t.Errorf("spreadOf(%v) kept values %v, want them in the order taken", tc.in, s.Values)
		}
	}
}

func TestInterleaved(t *testing.T) {
	var got []string
	for i := range 4 {
		got = append(got, interleaved([]string{"A", "B"}, i)...)
	}
	if want := []string{"A", "B", "B", "A", "A", "B", "B", "A"}; !reflect.DeepEqual(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// TestRunOrder: every variant runs as often early as late (item 1 runs
// four rounds of A..B B..A at full size, one at the quick size).
func TestRunOrder(t *testing.T) {
	for _, tc := range []struct {
		variants []string
		rounds   int
		want     string
	}{
		{[]string{"A", "B"}, 2, "A → B → B → A"},
		{[]string{"A", "B", "C"}, 1, "A → B → C"},
		{[]string{"A", "B", "C"}, 4, "A → B → C → C → B → A → A → B → C → C → B → A"},
	} {
		if got := joinOrder(runOrder(tc.variants, tc.rounds)); got != tc.want {
			t.Errorf("runOrder(%v, %d) = %s, want %s", tc.variants, tc.rounds, got, tc.want)
		}
	}
}

// TestLatenciesJSON: the raw results have every latency in milliseconds.
func TestLatenciesJSON(t *testing.T) {
	for _, tc := range []struct {
		in   latencies
		want string
	}{
		{nil, `[]`},
		{latencies{1500 * time.Microsecond, 2 * time.Second}, `[1.5,2000]`},
	} {
		got, err := json.Marshal(tc.in)
		if err != nil || string(got) != tc.want {
			t.Errorf("json.Marshal(%v) = %s, %v; want %s", []time.Duration(tc.in), got, err, tc.want)
		}
	}
	got, err := json.Marshal(restartRun{Skews: latencies{250 * time.Millisecond}})
	if err != nil || !strings.Contains(string(got), `"skewMs":[250]`) {
		t.Errorf("a restart run's skews in its raw results: %s, %v; want \"skewMs\":[250]", got, err)
	}
}

// TestCostJSON: a run's cost is in its raw results, under "cost".
func TestCostJSON(t *testing.T) {
	got, err := json.Marshal(burstRun{Cost: cost{mgrRequests: 3, apiMutating: 7}})
	if err != nil || !strings.Contains(string(got), `"cost":{"apiRequests":0,"apiWrites":7,`) || !strings.Contains(string(got), `"deckhandRequests":3,`) {
		t.Errorf("a burst's cost in its raw results: %s, %v; want its API writes and Deckhand's requests", got, err)
	}
}

func TestInsideDir(t *testing.T) {
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/repo/docs/benchmarks.md", true},
		{"/repo/docs/sub/x.md", true},
		{"/repo/bin/benchmarks-quick.md", false},
		{"/repo/docs-old/x.md", false},
		{"/elsewhere/docs/x.md", false},
	} {
		if got := insideDir(tc.path, "/repo/docs"); got != tc.want {
			t.Errorf("insideDir(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}
