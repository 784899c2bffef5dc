package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// memLimit is the soft memory limit (GOMEMLIMIT) of the memory item's last
// measurement: the RSS target less the process's own non-heap memory.
const memLimit = "100MiB"

type managerFigures struct {
	pods      int
	sync      time.Duration // process start -> every controller's caches synced
	controls  int           // controllers that started workers
	rss       int64         // VmRSS after sync and settle
	rssAnon   int64         // RssAnon of the sample with the largest VmRSS
	rssFile   int64         // RssFile of that sample
	heap      float64       // min go_memstats_heap_inuse_bytes over the samples
	heapAlloc float64       // min go_memstats_heap_alloc_bytes over the samples
	// runtimeSplit is the Go runtime's account of its memory at the
	// sample with the largest VmRSS.
	runtimeSplit string
}

// String is the figures as the bench's log reports them.
func (f *managerFigures) String() string {
	return fmt.Sprintf("%d pods: synced after %s (%d controllers), RSS %.1f MiB, live heap %.1f MiB, heap in use %.1f MiB; at the largest RSS: %s",
		f.pods, secs(f.sync), f.controls, mib(float64(f.rss)), mib(f.heapAlloc), mib(f.heap), f.runtimeSplit)
}

// goMemorySplit says where the Go runtime's memory is: heap spans in use,
// free heap pages not yet returned to the system, goroutine stacks, the
// runtime's own structures, and the heap size that triggers the next
// collection.
func goMemorySplit(m metrics) string {
	g := func(name string) float64 { return mib(m.sum("go_memstats_" + name)) }
	return fmt.Sprintf("heap in use %.1f, heap free unreturned %.1f, stacks %.1f, runtime %.1f, next GC at %.1f MiB",
		g("heap_inuse_bytes"), g("heap_idle_bytes")-g("heap_released_bytes"), g("stack_inuse_bytes"),
		g("mspan_inuse_bytes")+g("mcache_inuse_bytes")+g("gc_sys_bytes")+g("other_sys_bytes")+g("buck_hash_sys_bytes"), g("next_gc_bytes"))
}

// measureManager restarts the manager and measures its start-up and memory.
func measureManager(ctx context.Context, cfg *config, e *env, profile string, wantControllers int, environ []string) (*managerFigures, error) {
	var pods corev1.PodList
	if err := e.c.List(ctx, &pods); err != nil {
		return nil, err
	}
	start, err := e.startManager(ctx, environ)
	if err != nil {
		return nil, err
	}
	synced, n, err := cachesSynced(ctx, e.managerLog(), wantControllers, 2*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("caches did not sync: %w\n%s", err, e.mgr.Logs(20))
	}
	f := &managerFigures{pods: len(pods.Items), sync: synced.Sub(start), controls: n}
	probe := memoryProbe{pid: e.mgr.Pid(), forceGC: e.forceGC, metrics: e.managerMetrics,
		// The heap as the last collection left it: what was live when
		// the runtime set the heap size it is now allowed to reach.
		afterRSS: func(ctx context.Context) { e.saveProfile(ctx, cfg, "heap", profile+"-last-gc") }}
	if err := sampleMemory(ctx, cfg, probe, f); err != nil {
		return nil, err
	}
	e.saveProfile(ctx, cfg, "heap?gc=1", profile)
	logf("[memory] %s", f)
	return f, nil
}

// memoryProbe is what sampling a manager's memory needs: its process, a way
// to make it collect garbage, and its metrics.
type memoryProbe struct {
	pid     int
	forceGC func(context.Context) error
	metrics func(context.Context) (metrics, error)
	// afterRSS, if set, is called once the RSS samples are taken, before
	// any forced collection.
	afterRSS func(context.Context)
}

// sampleMemory fills in f's RSS and heap figures of a manager whose caches
// have synced.
func sampleMemory(ctx context.Context, cfg *config, p memoryProbe, f *managerFigures) error {
	// Let start-up work (a reconcile of everything) finish, then sample
	// RSS as the process runs: the Go runtime lets the heap grow to twice
	// the live data before collecting and returns freed pages gradually.
	wait, samples, gcSamples := 10*time.Second, 10, 3
	if cfg.quick {
		wait, samples, gcSamples = 2*time.Second, 3, 1
	}
	time.Sleep(wait)
	for i := range samples {
		if i > 0 {
			time.Sleep(time.Second)
		}
		rss, err := readRSS(p.pid)
		if err != nil {
			return err
		}
		if rss.total > f.rss {
			f.rss, f.rssAnon, f.rssFile = rss.total, rss.anon, rss.file
			m, err := p.metrics(ctx)
			if err != nil {
				return err
			}
			f.runtimeSplit = goMemorySplit(m)
		}
	}
	if p.afterRSS != nil {
		p.afterRSS(ctx)
	}
	// Then the heap, each time right after a collection, so that the
	// figures are live data and not whatever garbage the last cycle left
	// (a synced manager allocates little, so its last cycle may date from
	// the start-up).
	for range gcSamples {
		if err := p.forceGC(ctx); err != nil {
			return err
		}
		m, err := p.metrics(ctx)
		if err != nil {
			return err
		}
		h, a := m.sum("go_memstats_heap_inuse_bytes"), m.sum("go_memstats_heap_alloc_bytes")
		if f.heap == 0 || h < f.heap {
			f.heap = h
		}
		if f.heapAlloc == 0 || a < f.heapAlloc {
			f.heapAlloc = a
		}
		time.Sleep(time.Second)
	}
	return nil
}

func mib(b float64) float64 { return b / (1 << 20) }

// benchMemory: item 3. PodSets of 100 pods each on the fake node plus the
// WebServers (left by item 5, or created here), then a fresh manager.
func benchMemory(ctx context.Context, cfg *config, e *env, r *report, empty *managerFigures) error {
	if empty == nil {
		return fmt.Errorf("no empty-cluster baseline")
	}
	sets, per, wsN := cfg.size(100, 10), 100, cfg.size(500, 50)
	const ns = "memory"
	if err := e.namespace(ctx, ns); err != nil {
		return err
	}
	tr, err := trackPods(ctx, e.cs, ns)
	if err != nil {
		return err
	}
	defer tr.close()
	// The WebServers first, so that both measurements below hold them.
	var wl deckhandv1alpha1.WebServerList
	if err := e.c.List(ctx, &wl); err != nil {
		return err
	}
	if missing := wsN - len(wl.Items); missing > 0 {
		if err := e.namespace(ctx, "memory-ws"); err != nil {
			return err
		}
		if err := runWorkers(missing, 32, func(i int) error {
			return e.c.Create(ctx, &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ws-%04d", i), Namespace: "memory-ws"},
				Spec: deckhandv1alpha1.WebServerSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](0)}})
		}); err != nil {
			return err
		}
	}
	// Half of the PodSets, a measurement, the other half, another: the
	// difference between the two is what the second half's pods cost alone
	// (everything else the manager holds is in both).
	addPodSets := func(from, to int) error {
		start := time.Now()
		if err := runWorkers(to-from, 16, func(i int) error {
			app := fmt.Sprintf("mem-%03d", from+i)
			ps := &deckhandv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
				Spec: deckhandv1alpha1.PodSetSpec{Replicas: ptr.To(int32(per)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
					Template: scaleTemplate(app)}}
			return e.c.Create(ctx, ps)
		}); err != nil {
			return err
		}
		total := to * per
		if _, err := tr.waitFor(ctx, start, 30*time.Minute, fmt.Sprintf("%d PodSet pods Ready", total), func(_, ready int) bool { return ready >= total }); err != nil {
			return err
		}
		logf("[memory] %d pods Ready after %s", total, time.Since(start).Round(time.Second))
		settle()
		quiet, cpus, err := tr.waitQuiet(ctx, 30*time.Minute)
		if err != nil {
			return err
		}
		logf("[memory] %d pods: no pod changed and the machine quiet (%.2f CPUs busy) for %s after another %s", total, cpus, podsQuietFor, secs(quiet))
		return nil
	}
	if err := addPodSets(0, sets/2); err != nil {
		return err
	}
	half, err := measureManager(ctx, cfg, e, "heap-half", empty.controls, nil)
	if err != nil {
		return err
	}
	if err := addPodSets(sets/2, sets); err != nil {
		return err
	}
	full, err := measureManager(ctx, cfg, e, "heap-loaded", empty.controls, nil)
	if err != nil {
		return err
	}
	skipKruise, err := kruiseMissing(cfg)
	if err != nil {
		return err
	}
	var peers []memoryRun
	if skipKruise == "" {
		if peers, err = measureWithKruise(ctx, cfg, e, full, empty.controls); err != nil {
			return err
		}
	}
	// The same manager under a soft memory limit, as a container with a
	// memory limit would run it: the collector works harder instead of
	// letting the heap double the live data.
	limited, err := measureManager(ctx, cfg, e, "heap-loaded-memlimit", empty.controls, []string{"GOMEMLIMIT=" + memLimit})
	if err != nil {
		return err
	}
	var psl deckhandv1alpha1.PodSetList
	if err := e.c.List(ctx, &psl, client.InNamespace(ns)); err != nil {
		return err
	}
	extra := float64(full.pods - empty.pods)
	upper := (full.heapAlloc - empty.heapAlloc) / extra
	marginal := (full.heapAlloc - half.heapAlloc) / float64(full.pods-half.pods)
	marginalInuse := (full.heap - half.heap) / float64(full.pods-half.pods)

	var b strings.Builder
	fmt.Fprintf(&b, "Cluster B. %d WebServers with their Deployments and Services, then %d PodSets of %d pods (all Running and Ready on the kwok node) in two halves, "+
		"with a fresh manager process measured after each half. *Synced*: from starting the process until the last controller logs `Starting workers` (controller-runtime does so once the controller's caches have synced). "+
		"RSS: the largest VmRSS over 10 samples a second apart, from 10 s after that, as the process runs (the Go runtime lets the heap grow to twice the live data before collecting, GOGC=100, and returns freed pages gradually), split into anonymous pages (heap, stacks, runtime) and file-backed ones (the pages of the executable the process has touched, and those the kernel mapped around them) as `/proc/<pid>/status` counts them at that sample. "+
		"The Go runtime's account of its memory at that sample, from its metrics: heap spans in use, freed heap pages not yet returned to the system, stacks, its own structures, and the heap size at which it collects next (twice the live data at the last collection, GOGC=100). "+
		"Heap: right after a forced collection (`/debug/pprof/heap?gc=1`), the smallest of 3 samples of `go_memstats_heap_alloc_bytes` (live data) and `go_memstats_heap_inuse_bytes` (the spans holding it). "+
		"The empty row is the same manager on the empty cluster at the start of the run; the pod counts are every pod in the cluster (other items leave a few hundred).\n\n", wsN, sets, per)
	b.WriteString("| cluster | pods | caches synced | controllers | RSS | RSS anonymous / file-backed | live heap | heap in use | Go runtime at the largest RSS |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, x := range []struct {
		name string
		f    *managerFigures
	}{{"empty", empty}, {"half the PodSets", half}, {"loaded", full}, {"loaded, GOMEMLIMIT=" + memLimit, limited}} {
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %.1f MiB | %.1f / %.1f MiB | %.1f MiB | %.1f MiB | %s |\n", x.name, x.f.pods, secs(x.f.sync), x.f.controls,
			mib(float64(x.f.rss)), mib(float64(x.f.rssAnon)), mib(float64(x.f.rssFile)), mib(x.f.heapAlloc), mib(x.f.heap), x.f.runtimeSplit)
	}
	fmt.Fprintf(&b, "\nBytes per cached pod, marginal = (loaded - half) live heap / %d pods: **%.0f B** (%.0f B of heap spans in use). "+
		"Upper bound = (loaded - empty) live heap / %.0f pods: %.0f B; it also counts the %d PodSets, %d WebServers, their Deployments and Services, and the controllers' queues and expectations.\n",
		full.pods-half.pods, marginal, marginalInuse, extra, upper, len(psl.Items), wsN)
	kruiseMemory(r, &b, peers, skipKruise)
	if err := measureSubset(ctx, cfg, e, r, &b, full); err != nil {
		return err
	}
	r.section("3. Memory and start-up", b.String())
	// With OpenKruise beside, the loaded manager is measured
	// memoryRunsPerSide times between its runs (the same process and flags):
	// the targets are judged on the median and the range of those runs.
	// (measureWithKruise's runs start with full itself.)
	loaded := peers
	if len(loaded) == 0 {
		loaded = []memoryRun{{"Deckhand", full}}
	}
	var rss, sync []float64
	for _, x := range loaded {
		if x.manager == "Deckhand" {
			rss, sync = append(rss, float64(x.f.rss)/1e6), append(sync, x.f.sync.Seconds())
		}
	}
	rssS, syncS := spreadOf(rss), spreadOf(sync)
	mb := func(x float64) string { return fmt.Sprintf("%.1f MB", x) }
	secText := func(x float64) string { return fmt.Sprintf("%.2f s", x) }
	r.target("3", fmt.Sprintf("manager RSS with %d pods + %d WebServers (median)", full.pods, wsN), "<= 150 MB", atMost(150), rssS.figure(), mb, rssS.format(mb))
	r.info("3", fmt.Sprintf("(diagnostic) the same with GOMEMLIMIT=%s", memLimit),
		fmt.Sprintf("%.1f MB RSS, caches synced %s", float64(limited.rss)/1e6, secs(limited.sync)))
	r.target("3", "live heap per cached pod (marginal: the second half of the pods)", "<= 4 KB", atMost(4000), single(marginal),
		func(x float64) string { return fmt.Sprintf("%.0f B", x) }, fmt.Sprintf("%.0f B (upper bound, everything else included: %.0f B)", marginal, upper))
	r.target("3", "process start -> caches synced (median)", "<= 5 s", atMost(5), syncS.figure(), secText, syncS.format(secText))
	return nil
}

// cachesSynced waits until every controller the manager started has logged
// "Starting workers" (controller-runtime does so once the controller's
// caches have synced) and returns when the bench saw the last such line (the
// log's timestamps have whole seconds only; the bench reads the log every
// 20 ms).
// want, when > 0, is the number of controllers to wait for (the count the
// same manager reached on an empty cluster): controllers do not all log
// "Starting Controller" at once when the caches are large.
func cachesSynced(ctx context.Context, logPath string, want int, timeout time.Duration) (time.Time, int, error) {
	var n, lastStarting, lastN int
	var at, changed time.Time
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(logPath)
		if err != nil {
			return false, nil
		}
		s := string(data)
		// Quoted messages match Deckhand's JSON log ("msg":"Starting workers")
		// and kruise-manager's klog text ("Starting workers" controller=...).
		starting := strings.Count(s, `"Starting Controller"`)
		n = strings.Count(s, `"Starting workers"`)
		now := time.Now()
		if starting != lastStarting || n != lastN {
			lastStarting, lastN, changed = starting, n, now
			if starting > 0 && n == starting && (want == 0 || n >= want) {
				at = now
			}
		}
		// Done once every started controller has its workers and no new
		// controller has shown up for 3 seconds (the manager adds its
		// controllers once its webhook certificates are ready, and a late
		// one was seen to start a second after the first ones were running).
		// The figure is the time of the last change, not of the wait.
		if want > 0 {
			return n >= want, nil
		}
		return starting > 0 && n == starting && now.Sub(changed) >= 3*time.Second, nil
	})
	return at, n, err
}
