package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

// fleetSummary is one policy's figures, computed from the raw result only.
type fleetSummary struct {
	// AtLimit are the pods with a sample at or over their limit (the fake
	// node kills nothing: a real node would have OOM-killed them).
	AtLimit  int
	Restarts int
	// Healthy are the restarted pods of flat workloads.
	Healthy int
	// Outside are the restarts outside every window; OutsideNotUrgent
	// those of them no UrgentRestart Event explains.
	Outside          []fleetRestart
	OutsideNotUrgent int
	// Latencies: for each restarted pod with a sample at or over the
	// threshold, from the first such sample to the deletion seen, when no
	// closed window held it (crossed outside the windows, replaced in
	// one). Held counts those a window held; Predicted the pods replaced
	// before any sample reached the threshold.
	Latencies []time.Duration
	Held      int
	Predicted int
	// MaxGap is the longest time between two samples of one pod, or from
	// a pod's creation to its first; Stale the pods with a gap longer than
	// the manager's MetricsStaleAfter (3 min), during which a memory
	// trigger acts on nothing for them.
	MaxGap float64
	Stale  int
}

// fleetStaleAfter is the manager's default MetricsStaleAfter.
const fleetStaleAfter = 3 * time.Minute

// analyzeFleet sums up each policy of res.
func analyzeFleet(res *fleetResult) map[fleetPolicy]fleetSummary {
	plan := res.Plan
	threshold := plan.Limit * int64(plan.Threshold) / 100
	flat := map[string]bool{}
	for _, w := range plan.Workloads {
		flat[w.Name] = w.Class == leakFlat
	}
	inWindow := func(t float64) int {
		for i, w := range res.Windows {
			if t >= w[0] && t < w[1] {
				return i
			}
		}
		return -1
	}
	out := map[fleetPolicy]fleetSummary{}
	for _, pr := range res.Policies {
		var s fleetSummary
		pods := map[string]*fleetPod{}
		for _, p := range pr.Pods {
			pods[p.Name] = p
			for _, m := range p.Memory {
				if m.Bytes >= plan.Limit {
					s.AtLimit++
					break
				}
			}
			if gap := sampleGap(p, res.Windows); gap > 0 {
				s.MaxGap = max(s.MaxGap, gap)
				if gap > fleetStaleAfter.Seconds() {
					s.Stale++
				}
			}
		}
		for _, rs := range pr.Restarts {
			s.Restarts++
			p := pods[rs.Pod]
			if p != nil && flat[p.Workload] {
				s.Healthy++
			}
			if inWindow(rs.T) < 0 {
				s.Outside = append(s.Outside, rs)
				if rs.Reason != restartschedule.ReasonUrgentRestart {
					s.OutsideNotUrgent++
				}
			}
			if p == nil {
				continue
			}
			crossed := -1.0
			for _, m := range p.Memory {
				if m.Bytes >= threshold && m.T <= rs.T {
					crossed = m.T
					break
				}
			}
			switch {
			case crossed < 0:
				s.Predicted++
			case inWindow(crossed) < 0 && inWindow(rs.T) >= 0:
				s.Held++
			default:
				s.Latencies = append(s.Latencies, time.Duration((rs.T-crossed)*float64(time.Second)))
			}
		}
		out[pr.Policy] = s
	}
	return out
}

// sampleGap is the longest time without a sample in p's life within the
// days run: between two samples, from its creation (or day 0) to the first,
// from the last to its deletion (or the end).
func sampleGap(p *fleetPod, windows [][2]float64) float64 {
	if len(windows) == 0 {
		return 0
	}
	from, end := max(p.Created, 0), windows[len(windows)-1][1]
	if p.Deleted != nil {
		end = min(end, *p.Deleted)
	}
	gap := 0.0
	for _, m := range p.Memory {
		if m.T > end {
			break
		}
		gap, from = max(gap, m.T-from), m.T
	}
	return max(gap, end-from)
}

// reportLeakFleet writes the three-policy table and judges the need
// policy's targets.
func reportLeakFleet(r *report, res *fleetResult) {
	plan := res.Plan
	sum := analyzeFleet(res)
	hours := func(d time.Duration) string { return fmt.Sprintf("%.1f h", plan.simHours(d)) }
	var b strings.Builder
	classes := map[string][]string{}
	for _, w := range plan.Workloads {
		if w.Class != leakFlat {
			classes[w.Class] = append(classes[w.Class], fmt.Sprintf("%.1f", w.HoursToLimit))
		}
	}
	fmt.Fprintf(&b, "A cluster of its own with metrics-server (scraping every %s; the manager reuses a namespace's PodMetrics list for %s). "+
		"The same fleet in three namespaces, one per policy, created together: %d Deployments of %d pods each on kwok nodes (one per 100 pods), container `app` limited to %d MiB, "+
		"its working set simulated from the pod's annotations as %d MiB + a leak per second times the pod's age. "+
		"Leak rates (fixed seed %d): a third of the workloads flat; a third slow, a new pod reaching its limit in 48 to 120 simulated hours (uniform; drawn: %s); "+
		"the rest fast, 14 to 40 hours (drawn: %s), those under 24 hours too fast for a nightly restart.\n\n",
		localcluster.MetricsServerResolution, restartschedule.DefaultMetricsResolution, len(plan.Workloads), plan.Replicas, plan.Limit>>20, plan.Base>>20,
		fleetSeed, strings.Join(classes[leakSlow], ", "), strings.Join(classes[leakFast], ", "))
	fmt.Fprintf(&b, "Time compressed: a simulated day is %s of real time (a simulated hour %s), %d days run. Each night's window is the last %s of its day "+
		"(simulated %s to 24:00; RestartSchedule windows are whole minutes). Policies: *none*; *nightly*, a RestartSchedule of every Deployment "+
		"whose cron fires at each window's opening (%d workloads at a time, each rolling as its Deployment's default strategy says); "+
		"*need*, a memory trigger at %d%% of the limit `for` %s (%s), scope Pod, `maxConcurrent: %d`, `minPodAge` %s (%s), the same windows, "+
		"`urgency.predictedLimitWithin` %s (%s).\n\n",
		plan.Day, plan.hour(), plan.Days, plan.Window, fmt.Sprintf("%02d:00", 24-int(plan.simHours(plan.Window))), max(1, len(plan.Workloads)/4),
		plan.Threshold, plan.For, hours(plan.For), plan.podsAtOnce(), plan.MinPodAge, hours(plan.MinPodAge), plan.Urgent, hours(plan.Urgent))
	b.WriteString("Measured by the bench alone: a pod informer (a restart is a pod of the fleet seen terminating or gone during the days run) and a list of every PodMetrics each 5 s, " +
		"each pod's sample kept once per scrape. A pod *reached its limit* when a sample was at or over it: the kwok node kills nothing, so such a pod runs on over its limit where a real node would have OOM-killed it. " +
		"*Healthy*: a pod of a flat workload. *Detection latency*: from a pod's first sample at or over the threshold to its restart, " +
		"for the pods no closed window held (a pod that crossed outside the windows and was replaced in the next one is counted as held, not timed). " +
		"Restarts outside the windows are listed with the RestartSchedule's Event.\n\n")
	b.WriteString("| policy | pods that reached their limit | restarts | healthy pods restarted | restarts outside windows (not urgent) | restarted before reaching the threshold | crossed the threshold, held by a closed window | detection latency p50 / max | pods without a sample for over 3 min (longest gap) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range fleetPolicies {
		s := sum[p]
		lat := "—"
		if len(s.Latencies) > 0 {
			lat = fmt.Sprintf("%s / %s (%s / %s), n=%d", secs(percentile(s.Latencies, 50)), secs(percentile(s.Latencies, 100)),
				hours(percentile(s.Latencies, 50)), hours(percentile(s.Latencies, 100)), len(s.Latencies))
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d (%d) | %d | %d | %s | %d (%.0f s) |\n", p, s.AtLimit, s.Restarts, s.Healthy, len(s.Outside), s.OutsideNotUrgent, s.Predicted, s.Held, lat, s.Stale, s.MaxGap)
	}
	need, nightly := sum[policyNeed], sum[policyNightly]
	if len(need.Outside) > 0 {
		b.WriteString("\nThe need policy's restarts outside the windows:\n\n")
		for _, x := range need.Outside {
			fmt.Fprintf(&b, "- t=%.0f s (simulated day %d, %s), %s, %s: %s\n", x.T, int(x.T/plan.Day.Seconds()), simTimeOfDay(plan, x.T), x.Pod, x.Reason, x.Message)
		}
	}
	fmt.Fprintf(&b, "\nThe need policy's schedule found data missing (its MetricsUnavailable condition turning True; `deckhand_restartschedule_trigger_data_missing_total` by reason): %v.\n", res.DataMissing)
	fmt.Fprintf(&b, "\nRaw: `leakfleet` in the raw results: the plan, the windows, and per policy every pod's working-set series (`memory`: `t` seconds since day 0, `bytes`) and every restart (`t`, `pod`, `reason`); %d PodMetrics lists.\n", res.Samples)
	r.section("9. Restart on need: a leaking fleet, three policies", b.String())

	count := func(x float64) string { return fmt.Sprintf("%.0f", x) }
	r.target("9", "need policy: pods that reached their limit", "0", atMost(0), single(float64(need.AtLimit)), count,
		fmt.Sprintf("%d (nightly %d, none %d)", need.AtLimit, nightly.AtLimit, sum[policyNone].AtLimit))
	ratio := single(float64(need.Restarts) / float64(max(1, nightly.Restarts)))
	r.target("9", "need policy: restarts / nightly policy's restarts", "<= 0.50x", atMost(0.5), ratio, times,
		fmt.Sprintf("%s (%d / %d)", times(ratio.Median), need.Restarts, nightly.Restarts))
	r.target("9", "need policy: healthy (flat) pods restarted", "0", atMost(0), single(float64(need.Healthy)), count,
		fmt.Sprintf("%d (nightly %d)", need.Healthy, nightly.Healthy))
	r.target("9", "need policy: restarts outside windows not explained by an UrgentRestart Event", "0", atMost(0), single(float64(need.OutsideNotUrgent)), count,
		fmt.Sprintf("%d of %d outside the windows", need.OutsideNotUrgent, len(need.Outside)))
	bound := plan.For + 2*fleetResolution
	if len(need.Latencies) > 0 {
		worst := percentile(need.Latencies, 100)
		r.target("9", "need policy: detection latency, threshold crossing -> restart (max)", fmt.Sprintf("<= for + 2 resolutions = %s", secs(bound)),
			atMost(bound.Seconds()), single(worst.Seconds()), secsF, fmt.Sprintf("%s (p50 %s, n=%d)", secs(worst), secs(percentile(need.Latencies, 50)), len(need.Latencies)))
	} else {
		r.info("9", "need policy: detection latency", "no pod crossed its threshold unheld")
	}
}

// simTimeOfDay is t seconds since day 0 as the simulated time of day.
func simTimeOfDay(plan fleetPlan, t float64) string {
	day := plan.Day.Seconds()
	into := t - float64(int(t/day))*day
	h := into / day * 24
	return fmt.Sprintf("%02d:%02d", int(h), int((h-float64(int(h)))*60))
}
