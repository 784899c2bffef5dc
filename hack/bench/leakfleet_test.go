package main

import (
	"reflect"
	"testing"
	"time"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestFleetClockWindows(t *testing.T) {
	plan := fleetPlan{Day: 6 * time.Minute, Days: 2, Window: time.Minute}
	clk := fleetClock{start: time.Date(2026, 11, 27, 20, 57, 0, 0, time.UTC), plan: plan}
	windows, cron := clk.spec()
	// The nights of the two days run, and the next: the calendar goes on
	// after the run as a daily one would; the cron fires in the run only.
	want := []deckhandv1alpha1.RestartWindow{{Start: "21:02", End: "21:03"}, {Start: "21:08", End: "21:09"}, {Start: "21:14", End: "21:15"}}
	if !reflect.DeepEqual(windows, want) || cron != "2,8 * * * *" {
		t.Errorf("spec() = %v, %q; want %v, %q", windows, cron, want, "2,8 * * * *")
	}
	if got := clk.end(); !got.Equal(clk.start.Add(12 * time.Minute)) {
		t.Errorf("end() = %s", got)
	}
}

func TestNewFleetPlanClasses(t *testing.T) {
	plan := newFleetPlan(&config{})
	count := map[string]int{}
	for _, w := range plan.Workloads {
		count[w.Class]++
		switch w.Class {
		case leakFlat:
			if w.PerSecond != 0 {
				t.Errorf("%s: flat with a leak of %d B/s", w.Name, w.PerSecond)
			}
		case leakSlow:
			if w.HoursToLimit < 48 || w.HoursToLimit > 120 {
				t.Errorf("%s: slow, %.1f h to its limit", w.Name, w.HoursToLimit)
			}
		case leakFast:
			if w.HoursToLimit < 14 || w.HoursToLimit > 40 {
				t.Errorf("%s: fast, %.1f h to its limit", w.Name, w.HoursToLimit)
			}
		}
		if w.PerSecond > 0 {
			// The leak brings a new pod from its base to its limit in
			// HoursToLimit simulated hours.
			reach := time.Duration(float64(plan.Limit-plan.Base) / float64(w.PerSecond) * float64(time.Second))
			if h := plan.simHours(reach); h < w.HoursToLimit-0.01 || h > w.HoursToLimit+0.01 {
				t.Errorf("%s: reaches its limit in %.2f simulated hours, want %.1f", w.Name, h, w.HoursToLimit)
			}
		}
	}
	if len(plan.Workloads) != 20 || count[leakFlat] != 7 || count[leakSlow] != 7 || count[leakFast] != 6 {
		t.Errorf("classes %v of %d workloads, want a third flat", count, len(plan.Workloads))
	}
}

func TestAnalyzeFleet(t *testing.T) {
	const mi = 1 << 20
	plan := fleetPlan{Day: 6 * time.Minute, Days: 1, Limit: 100 * mi, Threshold: 90,
		Workloads: []workloadLeak{{Name: "flat", Class: leakFlat}, {Name: "leak", Class: leakFast}}}
	series := func(points ...float64) []fleetSample {
		var s []fleetSample
		for i := 0; i+1 < len(points); i += 2 {
			s = append(s, fleetSample{T: points[i], Bytes: int64(points[i+1] * mi)})
		}
		return s
	}
	res := &fleetResult{Plan: plan, Windows: [][2]float64{{300, 360}}, Policies: []*fleetPolicyResult{{
		Policy: policyNeed,
		Pods: []*fleetPod{
			{Name: "flat-1", Workload: "flat", Memory: series(0, 50, 100, 50)},
			// Crossed at 310 in the window, restarted at 330: timed, 20 s.
			{Name: "leak-1", Workload: "leak", Memory: series(300, 80, 310, 91, 320, 95)},
			// Crossed at 100, outside, restarted in the window: held.
			{Name: "leak-2", Workload: "leak", Memory: series(100, 92, 200, 100)},
			// Crossed at 150 and restarted outside the windows, urgent:
			// timed, 50 s.
			{Name: "leak-3", Workload: "leak", Memory: series(150, 95, 190, 99)},
			// Restarted outside the windows before its threshold, without
			// an urgent Event.
			{Name: "leak-4", Workload: "leak", Memory: series(100, 60)},
		},
		Restarts: []fleetRestart{
			{T: 330, Pod: "leak-1", Reason: "PodEvicted"},
			{T: 305, Pod: "leak-2", Reason: "PodEvicted"},
			{T: 200, Pod: "leak-3", Reason: "UrgentRestart"},
			{T: 120, Pod: "leak-4", Reason: "PodEvicted"},
			{T: 340, Pod: "flat-1", Reason: "PodEvicted"},
		},
	}}}
	got := analyzeFleet(res)[policyNeed]
	if got.AtLimit != 1 || got.Restarts != 5 || got.Healthy != 1 || len(got.Outside) != 2 || got.OutsideNotUrgent != 1 ||
		got.Held != 1 || got.Predicted != 2 || !reflect.DeepEqual(got.Latencies, []time.Duration{20 * time.Second, 50 * time.Second}) {
		t.Errorf("analyzeFleet = %+v", got)
	}
}

func TestSampleGap(t *testing.T) {
	windows := [][2]float64{{300, 360}}
	deleted := 200.0
	for name, tc := range map[string]struct {
		pod  fleetPod
		want float64
	}{
		"between two samples":        {fleetPod{Created: 0, Memory: []fleetSample{{T: 10}, {T: 200}, {T: 350}}}, 190},
		"creation to first sample":   {fleetPod{Created: 20, Memory: []fleetSample{{T: 120}, {T: 150}, {T: 350}}}, 200},
		"before day 0 counts from 0": {fleetPod{Created: -50, Memory: []fleetSample{{T: 40}, {T: 80}, {T: 120}, {T: 160}, {T: 200}, {T: 240}, {T: 280}, {T: 320}, {T: 355}}}, 40},
		"last sample to the end":     {fleetPod{Created: 0, Memory: []fleetSample{{T: 10}, {T: 100}}}, 260},
		"last sample to deletion":    {fleetPod{Created: 0, Deleted: &deleted, Memory: []fleetSample{{T: 10}, {T: 100}}}, 100},
		"no sample":                  {fleetPod{Created: 100}, 260},
	} {
		if got := sampleGap(&tc.pod, windows); got != tc.want {
			t.Errorf("%s: sampleGap = %v, want %v", name, got, tc.want)
		}
	}
}
