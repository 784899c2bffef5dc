package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

type managerFigures struct {
	pods      int
	sync      time.Duration // process start -> every controller's caches synced
	controls  int           // controllers that started workers
	rss       int64         // VmRSS after sync and settle
	heap      float64       // min go_memstats_heap_inuse_bytes over the samples
	heapAlloc float64       // min go_memstats_heap_alloc_bytes over the samples
}

// measureManager restarts the manager and measures its start-up and memory.
func measureManager(ctx context.Context, cfg *config, e *env, profile string, wantControllers int) (*managerFigures, error) {
	var pods corev1.PodList
	if err := e.c.List(ctx, &pods); err != nil {
		return nil, err
	}
	start, err := e.startManager(ctx)
	if err != nil {
		return nil, err
	}
	synced, n, err := cachesSynced(ctx, e.managerLog(), wantControllers, 2*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("caches did not sync: %w\n%s", err, e.mgr.Logs(20))
	}
	f := &managerFigures{pods: len(pods.Items), sync: synced.Sub(start), controls: n}
	// Let start-up work (a reconcile of everything) finish, then sample.
	time.Sleep(10 * time.Second)
	for i := range 10 {
		if i > 0 {
			time.Sleep(time.Second)
		}
		m, err := e.managerMetrics(ctx)
		if err != nil {
			return nil, err
		}
		h, a := m.sum("go_memstats_heap_inuse_bytes"), m.sum("go_memstats_heap_alloc_bytes")
		if f.heap == 0 || h < f.heap {
			f.heap = h
		}
		if f.heapAlloc == 0 || a < f.heapAlloc {
			f.heapAlloc = a
		}
		rss, err := rssBytes(e.mgr.Pid())
		if err != nil {
			return nil, err
		}
		f.rss = max(f.rss, rss)
	}
	e.saveProfile(ctx, cfg, "heap", profile)
	logf("[memory] %d pods: synced after %s (%d controllers), RSS %.1f MiB, heap in use %.1f MiB",
		f.pods, secs(f.sync), f.controls, mib(float64(f.rss)), mib(f.heap))
	return f, nil
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
	start := time.Now()
	if err := runWorkers(sets, 16, func(i int) error {
		app := fmt.Sprintf("mem-%03d", i)
		ps := &deckhandv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: ns},
			Spec: deckhandv1alpha1.PodSetSpec{Replicas: ptr.To(int32(per)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
				Template: scaleTemplate(app)}}
		return e.c.Create(ctx, ps)
	}); err != nil {
		return err
	}
	total := sets * per
	if _, err := tr.waitFor(ctx, start, 30*time.Minute, fmt.Sprintf("%d PodSet pods Ready", total), func(_, ready int) bool { return ready >= total }); err != nil {
		return err
	}
	logf("[memory] %d pods Ready after %s", total, time.Since(start).Round(time.Second))
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
	settle()
	full, err := measureManager(ctx, cfg, e, "heap-loaded", empty.controls)
	if err != nil {
		return err
	}
	var psl deckhandv1alpha1.PodSetList
	if err := e.c.List(ctx, &psl, client.InNamespace(ns)); err != nil {
		return err
	}
	extra := float64(full.pods - empty.pods)
	perPod := (full.heap - empty.heap) / extra
	perPodAlloc := (full.heapAlloc - empty.heapAlloc) / extra

	var b strings.Builder
	fmt.Fprintf(&b, "Cluster B. %d PodSets of %d pods (all Running and Ready on the kwok node) plus %d WebServers with their Deployments and Services; "+
		"then a fresh manager process. *Synced*: from starting the process until the last controller logs `Starting workers` (controller-runtime does so once the controller's caches have synced). "+
		"Memory sampled 10 s after that, 10 times a second apart: RSS the largest VmRSS, heap the smallest `go_memstats_heap_inuse_bytes` (least garbage). "+
		"The baseline is the same manager started on the empty cluster at the start of the run.\n\n", sets, per, wsN)
	b.WriteString("| cluster | pods | caches synced | controllers | RSS | heap in use | heap alloc |\n|---|---|---|---|---|---|---|\n")
	for _, x := range []struct {
		name string
		f    *managerFigures
	}{{"empty", empty}, {"loaded", full}} {
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %.1f MiB | %.1f MiB | %.1f MiB |\n", x.name, x.f.pods, secs(x.f.sync), x.f.controls, mib(float64(x.f.rss)), mib(x.f.heap), mib(x.f.heapAlloc))
	}
	fmt.Fprintf(&b, "\nBytes per cached pod = (loaded heap - empty heap) / %.0f pods: %.0f B (heap in use), %.0f B (heap alloc). "+
		"This is an upper bound: the difference also holds the %d PodSets, %d WebServers, their Deployments and Services, the controllers' queues and expectations.\n",
		extra, perPod, perPodAlloc, len(psl.Items), wsN)
	r.section("3. Memory and start-up", b.String())
	r.target("3", fmt.Sprintf("manager RSS with %d pods + %d WebServers", full.pods, wsN), "<= 150 MB", fmt.Sprintf("%.1f MB", float64(full.rss)/1e6), full.rss <= 150e6)
	r.target("3", "heap per cached pod", "<= 4 KB", fmt.Sprintf("%.0f B", perPod), perPod <= 4000)
	r.target("3", "process start -> caches synced", "<= 5 s", secs(full.sync), full.sync <= 5*time.Second)
	return nil
}
