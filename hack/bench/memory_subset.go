package main

import (
	"context"
	"fmt"
	"strings"
)

// subsetControllers is the --controllers of the subset measured beside the
// full manager: RestartSchedules only, which keeps no pod informer.
const subsetControllers = "restartschedule"

// subsetRunsPerSide is how often each manager is measured on the loaded
// cluster, alternating.
const subsetRunsPerSide = 3

// measureSubset measures, on the loaded cluster, a manager run with
// --controllers=restartschedule and the full one in turn, subsetRunsPerSide
// times each (full, the run benchMemory already took, is the full side's
// first), and writes the comparison into b and the raw runs into r.
func measureSubset(ctx context.Context, cfg *config, e *env, r *report, b *strings.Builder, full *managerFigures) error {
	fullRuns := []*managerFigures{full}
	var subsetRuns []*managerFigures
	defer func(args []string) { e.mgrArgs = args }(e.mgrArgs)
	base := e.mgrArgs
	for i := range subsetRunsPerSide {
		e.mgrArgs = append(append([]string(nil), base...), "--controllers="+subsetControllers)
		f, err := measureManager(ctx, cfg, e, fmt.Sprintf("heap-loaded-%s-%d", subsetControllers, i), 0, nil)
		if err != nil {
			return fmt.Errorf("--controllers=%s: %w", subsetControllers, err)
		}
		subsetRuns = append(subsetRuns, f)
		if len(fullRuns) == subsetRunsPerSide {
			continue
		}
		e.mgrArgs = base
		if f, err = measureManager(ctx, cfg, e, fmt.Sprintf("heap-loaded-all-%d", i+1), 0, nil); err != nil {
			return err
		}
		fullRuns = append(fullRuns, f)
	}
	rssOf := func(runs []*managerFigures) spread {
		xs := make([]float64, 0, len(runs))
		for _, f := range runs {
			xs = append(xs, mib(float64(f.rss)))
		}
		return spreadOf(xs)
	}
	heapOf := func(runs []*managerFigures) spread {
		xs := make([]float64, 0, len(runs))
		for _, f := range runs {
			xs = append(xs, mib(f.heapAlloc))
		}
		return spreadOf(xs)
	}
	mibText := func(x float64) string { return fmt.Sprintf("%.1f MiB", x) }
	fmt.Fprintf(b, "\nA manager that runs RestartSchedules only (`--controllers=%s`: no pod informer, no pod webhook, no SidecarSet or WebServer informers; it still caches the Deployments and PodSets it may restart) on the same loaded cluster, "+
		"measured as above, alternating with the full manager (%d runs each, the loaded row above the full side's first):\n\n", subsetControllers, subsetRunsPerSide)
	b.WriteString("| manager | pods | RSS, median (min–max) | live heap, median (min–max) |\n|---|---|---|---|\n")
	for _, x := range []struct {
		name string
		runs []*managerFigures
	}{{"all controllers", fullRuns}, {"--controllers=" + subsetControllers, subsetRuns}} {
		fmt.Fprintf(b, "| %s | %d | %s | %s |\n", x.name, x.runs[0].pods, rssOf(x.runs).format(mibText), heapOf(x.runs).format(mibText))
	}
	r.record("memorySubset", map[string]any{
		"controllers": subsetControllers, "pods": full.pods,
		"fullRSSMiB": rssOf(fullRuns), "subsetRSSMiB": rssOf(subsetRuns),
		"fullLiveHeapMiB": heapOf(fullRuns), "subsetLiveHeapMiB": heapOf(subsetRuns),
	})
	r.info("3", fmt.Sprintf("manager RSS with %d pods, --controllers=%s next to all (medians)", full.pods, subsetControllers),
		fmt.Sprintf("%s vs %s", rssOf(subsetRuns).format(mibText), rssOf(fullRuns).format(mibText)))
	return nil
}
