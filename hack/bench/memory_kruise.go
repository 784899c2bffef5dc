package main

// OpenKruise's manager as a peer in the memory item: the same cluster, the
// same pods, one manager running at a time.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// measureKruise stops Deckhand's manager, starts kruise-manager on the same
// cluster and measures it as measureManager measures Deckhand: caches synced
// (every controller it started logs "Starting workers"), then RSS and live
// heap. It stops Kruise again; the next measureManager starts Deckhand anew.
func measureKruise(ctx context.Context, cfg *config, e *env) (*managerFigures, error) {
	var pods corev1.PodList
	if err := e.c.List(ctx, &pods); err != nil {
		return nil, err
	}
	e.mgr.Stop()
	k, err := startKruise(ctx, e.cluster, benchKruiseOptions(cfg))
	if err != nil {
		return nil, err
	}
	defer k.stop()
	synced, n, err := cachesSynced(ctx, k.logPath, 0, 2*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("kruise-manager's caches did not sync: %w\n%s", err, k.logTail(20))
	}
	f := &managerFigures{pods: len(pods.Items), sync: synced.Sub(k.started), controls: n}
	if err := sampleMemory(ctx, cfg, memoryProbe{pid: k.pid(), forceGC: k.forceGC, metrics: k.metrics}, f); err != nil {
		return nil, err
	}
	logf("[memory] kruise-manager, %s", f)
	return f, nil
}

// memoryRun is one manager's measurement in the order they were taken.
type memoryRun struct {
	manager string
	f       *managerFigures
}

// memoryRunsPerSide is how often each manager is measured on the loaded
// cluster: a ratio of two medians of two runs each moved by a tenth between
// runs, so the verdict needs more.
const memoryRunsPerSide = 4

// memoryOrder is the order of the measurements: the managers alternate,
// starting with Deckhand (its first measurement is the loaded one already
// taken), each measured memoryRunsPerSide times.
func memoryOrder() []string {
	var order []string
	for range memoryRunsPerSide {
		order = append(order, "Deckhand", "OpenKruise")
	}
	return order
}

// measureWithKruise measures both managers memoryRunsPerSide times,
// alternating (first is Deckhand's measurement just taken on the loaded
// cluster, the first of memoryOrder).
func measureWithKruise(ctx context.Context, cfg *config, e *env, first *managerFigures, wantControllers int) ([]memoryRun, error) {
	runs := []memoryRun{{"Deckhand", first}}
	for _, manager := range memoryOrder()[1:] {
		var f *managerFigures
		var err error
		if manager == "Deckhand" {
			f, err = measureManager(ctx, cfg, e, "heap-loaded-2", wantControllers, nil)
		} else {
			f, err = measureKruise(ctx, cfg, e)
		}
		if err != nil {
			return nil, err
		}
		runs = append(runs, memoryRun{manager, f})
	}
	return runs, nil
}

// kruiseMemory writes the comparison of the runs into b and the summary.
// skip says why Kruise could not run ("" when it did).
func kruiseMemory(r *report, b *strings.Builder, runs []memoryRun, skip string) {
	if skip != "" {
		r.info("3", "memory, Deckhand vs OpenKruise", "not measured: "+skip)
		return
	}
	figures := byManager{}
	for _, x := range runs {
		figures.add(x.manager, "rss_bytes", float64(x.f.rss))
		figures.add(x.manager, "rss_anon_bytes", float64(x.f.rssAnon))
		figures.add(x.manager, "rss_file_bytes", float64(x.f.rssFile))
		figures.add(x.manager, "heap_alloc_bytes", x.f.heapAlloc)
		figures.add(x.manager, "heap_inuse_bytes", x.f.heap)
		figures.add(x.manager, "caches_synced_s", x.f.sync.Seconds())
		figures.add(x.manager, "pods", float64(x.f.pods))
	}
	d, k := figures["Deckhand"], figures["OpenKruise"]
	mibText := func(x float64) string { return fmt.Sprintf("%.1f MiB", mib(x)) }
	secText := func(x float64) string { return fmt.Sprintf("%.2f s", x) }

	fmt.Fprintf(b, "\n**OpenKruise as a peer** (docs/bench-kruise.md), on the loaded cluster (every pod above): the Deckhand manager is stopped, kruise-manager v1.9.1 started "+
		"(every Kruise CRD installed, so all of its controllers run as in a real installation, each with its informers; no Kruise objects exist; client limit QPS 1000/burst 2000; "+
		"`KruiseDaemon`, `WorkloadSpread` and `PodUnavailableBudgetDeleteGate` off), measured the same way as Deckhand (caches synced when every controller it started logs "+
		"`Starting workers`; RSS and heap sampled as above, its collections forced through its own `/debug/pprof/heap?gc=1`, heap from its controller-runtime metrics), then stopped. "+
		"Order: %s. Both see the same pods; Deckhand also holds its WebServers' Deployments and Services, which Kruise does not watch.\n\n", joinRuns(runs))
	b.WriteString("| manager | pods | caches synced | controllers | RSS | live heap | heap in use | Go runtime at the largest RSS |\n|---|---|---|---|---|---|---|---|\n")
	for _, x := range runs {
		fmt.Fprintf(b, "| %s | %d | %s | %d | %.1f MiB | %.1f MiB | %.1f MiB | %s |\n", x.manager, x.f.pods, secs(x.f.sync), x.f.controls, mib(float64(x.f.rss)), mib(x.f.heapAlloc), mib(x.f.heap), x.f.runtimeSplit)
	}
	b.WriteString("\n| figure (median, min–max) | Deckhand | OpenKruise | Deckhand / OpenKruise (ratio of the medians; range: every pairing of runs) |\n|---|---|---|---|\n")
	ratio := map[string]figure{}
	for _, x := range []struct{ name, key string }{{"RSS", "rss_bytes"}, {"RSS, anonymous", "rss_anon_bytes"}, {"RSS, file-backed", "rss_file_bytes"}, {"live heap", "heap_alloc_bytes"}, {"heap in use", "heap_inuse_bytes"}, {"caches synced", "caches_synced_s"}} {
		ds, ks := spreadOf(d[x.key]), spreadOf(k[x.key])
		ratio[x.key] = ratioFigure(ds, ks)
		f := mibText
		if x.key == "caches_synced_s" {
			f = secText
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s (%s) |\n", x.name, ds.format(f), ks.format(f), times(ratio[x.key].Median), ratio[x.key].rangeText(times))
	}
	spreads := map[string]map[string]spread{}
	for manager, byFigure := range figures {
		spreads[manager] = map[string]spread{}
		for key, xs := range byFigure {
			spreads[manager][key] = spreadOf(xs)
		}
	}
	r.record("memory-vs-kruise", map[string]any{"order": joinRuns(runs), "runs": figures, "spreads": spreads, "ratios": ratio})
	pods := int(spreadOf(k["pods"]).Median)
	rss, heap := ratio["rss_bytes"], ratio["heap_alloc_bytes"]
	r.target("3", fmt.Sprintf("manager RSS with %d pods, Deckhand / OpenKruise (one manager at a time, medians of %d interleaved runs a side)", pods, memoryRunsPerSide), "<= 0.5x",
		atMost(0.5), rss, times,
		fmt.Sprintf("%s (Deckhand %s, Kruise %s)", times(rss.Median), spreadOf(d["rss_bytes"]).format(mibText), spreadOf(k["rss_bytes"]).format(mibText)))
	r.info("3", "RSS split: anonymous (heap, stacks, runtime) / file-backed (the executable's touched pages), Deckhand / OpenKruise (medians)",
		fmt.Sprintf("anonymous %s (range %s; %s vs %s), file-backed %s (range %s; %s vs %s)",
			times(ratio["rss_anon_bytes"].Median), ratio["rss_anon_bytes"].rangeText(times), spreadOf(d["rss_anon_bytes"]).format(mibText), spreadOf(k["rss_anon_bytes"]).format(mibText),
			times(ratio["rss_file_bytes"].Median), ratio["rss_file_bytes"].rangeText(times), spreadOf(d["rss_file_bytes"]).format(mibText), spreadOf(k["rss_file_bytes"]).format(mibText)))
	r.info("3", "live heap, Deckhand / OpenKruise (medians)", fmt.Sprintf("%s (range %s; Deckhand %s, Kruise %s)", times(heap.Median), heap.rangeText(times),
		spreadOf(d["heap_alloc_bytes"]).format(mibText), spreadOf(k["heap_alloc_bytes"]).format(mibText)))
}

func joinRuns(runs []memoryRun) string {
	var s []string
	for _, x := range runs {
		s = append(s, x.manager)
	}
	return strings.Join(s, " → ")
}
