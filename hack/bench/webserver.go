package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

const revEnv = "BENCH_REV"

// benchWebServer: item 5. A burst of n WebServers (replicas 0: the figure
// is Deckhand's work, not the scheduler's), then spec changes at 10/s.
func benchWebServer(ctx context.Context, cfg *config, e *env, r *report) error {
	n := cfg.size(500, 50)
	churn := time.Duration(cfg.size(60, 10)) * time.Second
	const ns = "webserver"
	if err := e.namespace(ctx, ns); err != nil {
		return err
	}
	// The Deployment informer records when each BENCH_REV value first shows
	// up in a Deployment's template.
	var mu sync.Mutex
	seenRev := map[string]time.Time{}
	record := func(obj any) {
		now := time.Now()
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			return
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, ev := range c.Env {
				if ev.Name == revEnv {
					mu.Lock()
					if _, ok := seenRev[ev.Value]; !ok {
						seenRev[ev.Value] = now
					}
					mu.Unlock()
				}
			}
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(e.cs, 0, informers.WithNamespace(ns))
	if _, err := factory.Apps().V1().Deployments().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, o any) { record(o) },
	}); err != nil {
		return err
	}
	stop := make(chan struct{})
	defer func() { close(stop); factory.Shutdown() }()
	factory.Start(stop)

	s0 := e.snapshot(ctx)
	start := time.Now()
	if err := runWorkers(n, 32, func(i int) error {
		ws := &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("ws-%04d", i), Namespace: ns},
			Spec: deckhandv1alpha1.WebServerSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](0),
				Env: []corev1.EnvVar{{Name: revEnv, Value: fmt.Sprintf("init-%d", i)}}}}
		return e.c.Create(ctx, ws)
	}); err != nil {
		return err
	}
	created := time.Since(start)
	var state string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		var wl deckhandv1alpha1.WebServerList
		var dl appsv1.DeploymentList
		var sl corev1.ServiceList
		if e.c.List(ctx, &wl, client.InNamespace(ns)) != nil || e.c.List(ctx, &dl, client.InNamespace(ns)) != nil || e.c.List(ctx, &sl, client.InNamespace(ns)) != nil {
			return false, nil
		}
		current := 0
		for _, w := range wl.Items {
			if w.Status.ObservedGeneration == w.Generation && apimeta.IsStatusConditionTrue(w.Status.Conditions, deckhandv1alpha1.WebServerConditionAvailable) {
				current++
			}
		}
		state = fmt.Sprintf("%d Deployments, %d Services, %d/%d statuses current", len(dl.Items), len(sl.Items), current, n)
		return len(dl.Items) >= n && len(sl.Items) >= n && current == n, nil
	})
	if err != nil {
		return fmt.Errorf("burst: %w (%s)", err, state)
	}
	burst := time.Since(start)
	settle()
	s1 := e.snapshot(ctx)
	burstCost := diff(s0, s1)
	logf("[webserver] burst of %d: created in %s, all current after %s", n, secs(created), secs(burst))

	// Churn: one spec change every 100 ms, round robin over the WebServers.
	sent := map[string]time.Time{}
	var sentMu sync.Mutex
	var wg sync.WaitGroup
	var patchErrs int
	tick := time.NewTicker(100 * time.Millisecond)
	changes := int(churn / (100 * time.Millisecond))
	for k := range changes {
		<-tick.C
		rev := fmt.Sprintf("rev-%d", k)
		name := fmt.Sprintf("ws-%04d", k%n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws := &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
			patch := fmt.Appendf(nil, `{"spec":{"env":[{"name":%q,"value":%q}]}}`, revEnv, rev)
			t := time.Now()
			if err := e.c.Patch(ctx, ws, client.RawPatch(types.MergePatchType, patch)); err != nil {
				sentMu.Lock()
				patchErrs++
				sentMu.Unlock()
				return
			}
			sentMu.Lock()
			sent[rev] = t
			sentMu.Unlock()
		}()
	}
	tick.Stop()
	wg.Wait()
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for rev := range sent {
			if _, ok := seenRev[rev]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	settle()
	s2 := e.snapshot(ctx)
	churnCost := diff(s1, s2)
	var lat []time.Duration
	missing := 0
	mu.Lock()
	for rev, t := range sent {
		if s, ok := seenRev[rev]; ok {
			lat = append(lat, s.Sub(t))
		} else {
			missing++
		}
	}
	mu.Unlock()
	p99 := percentile(lat, 99)

	var b strings.Builder
	fmt.Fprintf(&b, "Cluster B. Burst: %d WebServers (`replicas: 0`, so the figure is Deckhand's work and not the scheduler's) created by 32 workers; "+
		"done when every Deployment and Service exists and every WebServer has `status.observedGeneration == metadata.generation` and `Available=True` (polled every 200 ms). "+
		"Churn: one `spec.env` change every 100 ms for %s, round robin; latency from sending the patch until the bench's Deployment informer sees the new value in the template.\n\n", n, churn)
	b.WriteString("| phase | figure |\n|---|---|\n")
	fmt.Fprintf(&b, "| burst: all created | %s |\n| burst: all Deployments, Services and statuses current | %s |\n", secs(created), secs(burst))
	fmt.Fprintf(&b, "| churn: changes sent / failed / never seen | %d / %d / %d |\n", len(sent), patchErrs, missing)
	fmt.Fprintf(&b, "| churn: change -> Deployment updated p50 / p90 / p99 / max | %s / %s / %s / %s |\n", ms(percentile(lat, 50)), ms(percentile(lat, 90)), ms(p99), ms(percentile(lat, 100)))
	fmt.Fprintf(&b, "| burst cost (item 6): reconciles per WebServer / Deckhand requests per WebServer | %.2f / %.2f (%s) |\n",
		burstCost.reconciles["webserver"]/float64(n), burstCost.mgrRequests/float64(n), byMethod(burstCost.mgrByMethod, float64(n)))
	if len(sent) > 0 {
		fmt.Fprintf(&b, "| churn cost (item 6): reconciles per change / Deckhand requests per change | %.2f / %.2f (%s) |\n",
			churnCost.reconciles["webserver"]/float64(len(sent)), churnCost.mgrRequests/float64(len(sent)), byMethod(churnCost.mgrByMethod, float64(len(sent))))
	}
	r.section("5. WebServer burst and churn", b.String())
	r.target("5", fmt.Sprintf("burst of %d WebServers until all Deployments+Services exist and statuses are current", n), "<= 15 s", secs(burst), burst <= 15*time.Second)
	r.target("5", "churn (10 changes/s): change -> Deployment updated p99", "<= 1 s",
		fmt.Sprintf("%s (%d changes, %d not seen)", secs(p99), len(sent), missing), p99 <= time.Second && missing == 0 && patchErrs == 0)
	if len(sent) > 0 {
		r.target("6", "reconciles per WebServer spec change", "reported (no target)", fmt.Sprintf("%.2f", churnCost.reconciles["webserver"]/float64(len(sent))), true)
	}
	return nil
}
