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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/webserver"
)

const revEnv = "BENCH_REV"

// revTracker records when each BENCH_REV value first shows up in the
// template of a Deployment of one namespace (through an informer).
type revTracker struct {
	mu      sync.Mutex
	seen    map[string]time.Time
	factory informers.SharedInformerFactory
	stop    chan struct{}
}

func trackRevisions(e *env, ns string) (*revTracker, error) {
	t := &revTracker{seen: map[string]time.Time{}, stop: make(chan struct{}),
		factory: informers.NewSharedInformerFactoryWithOptions(e.cs, 0, informers.WithNamespace(ns))}
	record := func(obj any) {
		now := time.Now()
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			return
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, ev := range c.Env {
				if ev.Name == revEnv {
					t.mu.Lock()
					if _, ok := t.seen[ev.Value]; !ok {
						t.seen[ev.Value] = now
					}
					t.mu.Unlock()
				}
			}
		}
	}
	if _, err := t.factory.Apps().V1().Deployments().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, o any) { record(o) },
	}); err != nil {
		return nil, err
	}
	t.factory.Start(t.stop)
	return t, nil
}

func (t *revTracker) close() { close(t.stop); t.factory.Shutdown() }

// churnResult is one churn phase: latency from each change sent to its
// value seen in a Deployment template.
type churnResult struct {
	lat              []time.Duration
	sent, errs, lost int
}

// fields is c for the raw results' JSON: every latency in milliseconds.
func (c churnResult) fields() map[string]any {
	lat := make([]float64, len(c.lat))
	for i, d := range c.lat {
		lat[i] = float64(d) / float64(time.Millisecond)
	}
	return map[string]any{"sent": c.sent, "failed": c.errs, "neverSeen": c.lost, "latencyMs": lat}
}

// runChurn sends one change every 100 ms for d, round robin over n objects
// (patch(name, rev) sends it), and waits up to 30 s for every change to show.
func runChurn(ctx context.Context, t *revTracker, n int, d time.Duration, prefix string, patch func(ctx context.Context, name, rev string) error) churnResult {
	sent := map[string]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var res churnResult
	tick := time.NewTicker(100 * time.Millisecond)
	for k := range int(d / (100 * time.Millisecond)) {
		<-tick.C
		rev := fmt.Sprintf("%s-%d", prefix, k)
		name := fmt.Sprintf("ws-%04d", k%n)
		wg.Go(func() {
			start := time.Now()
			err := patch(ctx, name, rev)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.errs++
				return
			}
			sent[rev] = start
		})
	}
	tick.Stop()
	wg.Wait()
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		for rev := range sent {
			if _, ok := t.seen[rev]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	res.sent = len(sent)
	for rev, at := range sent {
		if s, ok := t.seen[rev]; ok {
			res.lat = append(res.lat, s.Sub(at))
		} else {
			res.lost++
		}
	}
	return res
}

// waitAvailable polls until ready(ns) reports true, up to 5 minutes.
func waitAvailable(ctx context.Context, ready func(ctx context.Context) (bool, string)) error {
	var state string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		ok, s := ready(ctx)
		state = s
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("%w (%s)", err, state)
	}
	return nil
}

// countDeployments lists the Deployments of ns and counts those for which
// ok holds.
func countDeployments(ctx context.Context, e *env, ns string, ok func(*appsv1.Deployment) bool) (total, matched int, err error) {
	var dl appsv1.DeploymentList
	if err := e.c.List(ctx, &dl, client.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	for i := range dl.Items {
		if ok(&dl.Items[i]) {
			matched++
		}
	}
	return len(dl.Items), matched, nil
}

// waitDeployments waits until the n Deployments of ns are at generation gen
// (or later) and rolled out: observed, every replica updated and available,
// none of an older ReplicaSet left.
func waitDeployments(ctx context.Context, e *env, ns string, n int, gen int64, timeout time.Duration) error {
	var state string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		total, done, err := countDeployments(ctx, e, ns, func(d *appsv1.Deployment) bool {
			want := ptr.Deref(d.Spec.Replicas, 1)
			return d.Generation >= gen && d.Status.ObservedGeneration == d.Generation &&
				d.Status.UpdatedReplicas == want && d.Status.Replicas == want && d.Status.AvailableReplicas == want
		})
		state = fmt.Sprintf("%d Deployments, %d rolled out", total, done)
		return err == nil && total >= n && done == total, nil
	})
	if err != nil {
		return fmt.Errorf("%w (%s)", err, state)
	}
	return nil
}

// deploymentsAvailable reports whether every Deployment of ns (n expected)
// is observed at its generation and Available, and n Services exist.
func deploymentsAvailable(e *env, ns string, n int) func(ctx context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		var sl corev1.ServiceList
		total, avail, err := countDeployments(ctx, e, ns, func(d *appsv1.Deployment) bool {
			if d.Status.ObservedGeneration != d.Generation {
				return false
			}
			for _, c := range d.Status.Conditions {
				if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
					return true
				}
			}
			return false
		})
		if err != nil || e.c.List(ctx, &sl, client.InNamespace(ns)) != nil {
			return false, "list failed"
		}
		return total >= n && len(sl.Items) >= n && avail == n,
			fmt.Sprintf("%d Deployments (%d available), %d Services", total, avail, len(sl.Items))
	}
}

// plainDeployment and plainService are what a WebServer's controller
// creates, written by hand for the plain-client baseline.
func plainDeployment(ns, name, rev string) *appsv1.Deployment {
	lbl := map[string]string{"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
					Env: []corev1.EnvVar{{Name: revEnv, Value: rev}},
				}}},
			},
		},
	}
}

func plainService(ns, name string) *corev1.Service {
	lbl := map[string]string{"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": name}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl},
		Spec:       corev1.ServiceSpec{Selector: lbl, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
}

// burstRounds: the burst runs A B B A ..., burstRounds times per variant,
// each in a fresh namespace.
const burstRounds = 2

const (
	burstPlain    = "plain client"
	burstDeckhand = "Deckhand"
)

// burstRun is one burst of n WebServers (or of their Deployments and
// Services by a plain client) in a namespace of its own.
type burstRun struct {
	Variant     string         `json:"variant"`
	Round       int            `json:"round"`
	Namespace   string         `json:"namespace"`
	CreatedSecs float64        `json:"createdSeconds"`
	Seconds     float64        `json:"allCurrentSeconds"`
	Cost        map[string]any `json:"cost,omitempty"`
	// SeenMs is, per Deployment, when the bench's informer first saw it
	// (after the burst's start); AvailableMs from then until it saw it
	// Available: the creator's part and kube-controller-manager's part.
	SeenMs      []float64 `json:"deploymentSeenMs"`
	AvailableMs []float64 `json:"seenToAvailableMs"`
	cost        cost
}

// burstTimeline records through an informer when each Deployment of a
// namespace is first seen and first seen Available.
type burstTimeline struct {
	mu              sync.Mutex
	seen, available map[string]time.Time
	*deploymentWatch
}

func trackBurst(ctx context.Context, e *env, ns string) (*burstTimeline, error) {
	t := &burstTimeline{seen: map[string]time.Time{}, available: map[string]time.Time{}}
	record := func(o any) {
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			return
		}
		now := time.Now()
		t.mu.Lock()
		defer t.mu.Unlock()
		if _, ok := t.seen[d.Name]; !ok {
			t.seen[d.Name] = now
		}
		if _, ok := t.available[d.Name]; !ok && deploymentCondition(d, appsv1.DeploymentAvailable) {
			t.available[d.Name] = now
		}
	}
	var err error
	if t.deploymentWatch, err = watchDeployments(ctx, e, ns, toolscache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, o any) { record(o) }}); err != nil {
		return nil, err
	}
	return t, nil
}

// durations returns, in milliseconds, each Deployment's first sighting
// after start and the time from then until it was Available.
func (t *burstTimeline) durations(start time.Time) (seen, available []float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, at := range t.seen {
		seen = append(seen, msFloat(at.Sub(start)))
		if av, ok := t.available[name]; ok {
			available = append(available, msFloat(av.Sub(at)))
		}
	}
	return seen, available
}

func deploymentCondition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// runBurst creates n WebServers (Deckhand) or their Deployments and Services
// (plain client) with webserver.Workers workers in ns, and waits until every Deployment is
// Available (and, for Deckhand, every WebServer's status is current).
func runBurst(ctx context.Context, e *env, variant, ns string, n int) (*burstRun, error) {
	run := &burstRun{Variant: variant, Namespace: ns}
	if err := e.namespace(ctx, ns); err != nil {
		return nil, err
	}
	s0, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	tl, err := trackBurst(ctx, e, ns)
	if err != nil {
		return nil, err
	}
	defer tl.close()
	start := time.Now()
	err = runWorkers(n, webserver.Workers, func(i int) error {
		name, rev := fmt.Sprintf("ws-%04d", i), fmt.Sprintf("init-%d", i)
		if variant == burstPlain {
			if err := e.c.Create(ctx, plainDeployment(ns, name, rev)); err != nil {
				return err
			}
			return e.c.Create(ctx, plainService(ns, name))
		}
		return e.c.Create(ctx, &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: deckhandv1alpha1.WebServerSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](0),
				Env: []corev1.EnvVar{{Name: revEnv, Value: rev}}}})
	})
	if err != nil {
		return nil, err
	}
	run.CreatedSecs = time.Since(start).Seconds()
	err = waitAvailable(ctx, func(ctx context.Context) (bool, string) {
		ok, state := deploymentsAvailable(e, ns, n)(ctx)
		if variant == burstPlain {
			return ok, state
		}
		var wl deckhandv1alpha1.WebServerList
		if e.c.List(ctx, &wl, client.InNamespace(ns)) != nil {
			return false, state
		}
		current := 0
		for _, w := range wl.Items {
			if w.Status.ObservedGeneration == w.Generation && apimeta.IsStatusConditionTrue(w.Status.Conditions, deckhandv1alpha1.WebServerAvailableCondition) {
				current++
			}
		}
		return ok && current == n, fmt.Sprintf("%s, %d/%d WebServer statuses current", state, current, n)
	})
	if err != nil {
		return nil, fmt.Errorf("%s burst in %s: %w", variant, ns, err)
	}
	run.Seconds = time.Since(start).Seconds()
	settle()
	s1, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	run.cost = diff(s0, s1)
	run.Cost = run.cost.fields()
	run.SeenMs, run.AvailableMs = tl.durations(start)
	logf("[webserver] %s burst of %d in %s: created in %.2f s, all current after %.2f s", variant, n, ns, run.CreatedSecs, run.Seconds)
	return run, nil
}

// benchWebServer: item 5. Bursts of n WebServers (replicas 0: the figure
// is Deckhand's work, not the scheduler's) and the same burst by a plain
// client writing the Deployments and Services itself, interleaved A B B A
// in fresh namespaces: the control plane's own time for the same objects
// (kube-controller-manager's Deployment controller must mark every
// Deployment Available in both). Then spec changes at 10/s on the last
// burst of each variant. Every namespace but the last Deckhand one is
// deleted before the next burst; item 3 keeps those WebServers.
func benchWebServer(ctx context.Context, cfg *config, e *env, r *report) error {
	n := cfg.size(500, 50)
	churn := time.Duration(cfg.size(60, 10)) * time.Second
	variants := []string{burstPlain, burstDeckhand}
	var runs []*burstRun
	last := map[string]string{} // variant -> namespace of its last burst
	for i := range burstRounds {
		for _, v := range interleaved(variants, i) {
			ns := fmt.Sprintf("webserver-%s-%d", map[string]string{burstPlain: "plain", burstDeckhand: "deckhand"}[v], i)
			run, err := runBurst(ctx, e, v, ns, n)
			if err != nil {
				return err
			}
			run.Round = i
			runs = append(runs, run)
			if prev := last[v]; prev != "" {
				if err := e.deleteNamespace(ctx, prev, 5*time.Minute); err != nil {
					return fmt.Errorf("deleting %s: %w", prev, err)
				}
			}
			last[v] = ns
		}
	}
	sum := map[string]spread{}
	for _, v := range variants {
		var xs []float64
		for _, x := range runs {
			if x.Variant == v {
				xs = append(xs, x.Seconds)
			}
		}
		sum[v] = spreadOf(xs)
	}
	var dhRuns []*burstRun
	for _, x := range runs {
		if x.Variant == burstDeckhand {
			dhRuns = append(dhRuns, x)
		}
	}
	burstCost := dhRuns[len(dhRuns)-1].cost

	bt, err := trackRevisions(e, last[burstPlain])
	if err != nil {
		return err
	}
	defer bt.close()
	baseChurn := runChurn(ctx, bt, n, churn, "base", func(ctx context.Context, name, rev string) error {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: last[burstPlain]}}
		patch := fmt.Appendf(nil, `{"spec":{"template":{"spec":{"containers":[{"name":"web","env":[{"name":%q,"value":%q}]}]}}}}`, revEnv, rev)
		return e.c.Patch(ctx, d, client.RawPatch(types.StrategicMergePatchType, patch))
	})
	logf("[webserver] baseline churn: %d changes, p99 %s", baseChurn.sent, ms(percentile(baseChurn.lat, 99)))
	if err := e.deleteNamespace(ctx, last[burstPlain], 5*time.Minute); err != nil {
		return err
	}
	settle()

	ns := last[burstDeckhand]
	t, err := trackRevisions(e, ns)
	if err != nil {
		return err
	}
	defer t.close()
	s1, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	res := runChurn(ctx, t, n, churn, "rev", func(ctx context.Context, name, rev string) error {
		ws := &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		patch := fmt.Appendf(nil, `{"spec":{"env":[{"name":%q,"value":%q}]}}`, revEnv, rev)
		return e.c.Patch(ctx, ws, client.RawPatch(types.MergePatchType, patch))
	})
	settle()
	s2, err := e.scrape(ctx)
	if err != nil {
		return err
	}
	churnCost := diff(s1, s2)
	p99 := percentile(res.lat, 99)
	logf("[webserver] churn: %d changes, p99 %s", res.sent, ms(p99))

	r.record("webserver", map[string]any{
		"webServers": n, "churnSeconds": churn.Seconds(), "bursts": runs,
		"baselineChurn": baseChurn.fields(), "churn": res.fields(), "churnCost": churnCost.fields(),
	})
	dh, plain := sum[burstDeckhand], sum[burstPlain]
	ratio := dh.Median / plain.Median
	var b strings.Builder
	fmt.Fprintf(&b, "Cluster B. Burst: %d WebServers (`replicas: 0`, so the figure is Deckhand's work and not the scheduler's) created by %d workers; "+
		"done when every Deployment and Service exists, every Deployment is observed at its generation and `Available` (kube-controller-manager's part) and every WebServer has `status.observedGeneration == metadata.generation` and `Available=True` (polled every 200 ms). "+
		"Baseline: a plain client (%d workers, as many as Deckhand's WebServer controller has) creating the same Deployments and Services itself, done when every Deployment is Available. The bursts alternate (%s), %d of each, each in a fresh namespace; the previous burst's namespace of the same variant is deleted (and gone) before the next burst starts. "+
		"Churn, on the last burst of each variant (plain client first): one change every 100 ms for %s, round robin (Deckhand: `spec.env` of the WebServer; plain client: the Deployment's template); latency from sending the patch until the bench's Deployment informer sees the new value in the template.\n\n",
		n, webserver.Workers, webserver.Workers, strings.Join(burstOrder(variants), " → "), burstRounds, churn)
	b.WriteString("| run | variant | created | all Available (and WebServer statuses current) | Deployment seen p50 / max | seen -> Available p50 / max | reconciles per WebServer | Deckhand requests per WebServer |\n|---|---|---|---|---|---|---|---|\n")
	for i, x := range runs {
		timeline := fmt.Sprintf("%s / %s | %s / %s", msOf(x.SeenMs, 50), msOf(x.SeenMs, 100), msOf(x.AvailableMs, 50), msOf(x.AvailableMs, 100))
		if x.Variant == burstDeckhand {
			fmt.Fprintf(&b, "| %d | %s | %.2f s | %.2f s | %s | %.2f | %.2f (%s) |\n", i+1, x.Variant, x.CreatedSecs, x.Seconds, timeline,
				x.cost.reconciles["webserver"]/float64(n), x.cost.mgrRequests/float64(n), byMethod(x.cost.mgrByMethod, float64(n)))
		} else {
			fmt.Fprintf(&b, "| %d | %s | %.2f s | %.2f s | %s | | |\n", i+1, x.Variant, x.CreatedSecs, x.Seconds, timeline)
		}
	}
	b.WriteString("\n*Deployment seen*: from the burst's start until the bench's informer first saw each Deployment (the creator's part); *seen -> Available*: from then until it saw it Available (kube-controller-manager's part).\n")
	fmt.Fprintf(&b, "\nBurst, median (min–max): Deckhand %s, plain client %s: %.2fx.\n\n", dh.format(secsF), plain.format(secsF), ratio)
	b.WriteString("| churn | plain client | Deckhand |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| changes sent / failed / never seen | %d / %d / %d | %d / %d / %d |\n", baseChurn.sent, baseChurn.errs, baseChurn.lost, res.sent, res.errs, res.lost)
	for _, p := range []float64{50, 90, 99, 100} {
		fmt.Fprintf(&b, "| change -> Deployment updated, p%.0f | %s | %s |\n", p, ms(percentile(baseChurn.lat, p)), ms(percentile(res.lat, p)))
	}
	if res.sent > 0 {
		fmt.Fprintf(&b, "| cost (item 6): reconciles per change / Deckhand requests per change | | %.2f / %.2f (%s) |\n",
			churnCost.reconciles["webserver"]/float64(res.sent), churnCost.mgrRequests/float64(res.sent), byMethod(churnCost.mgrByMethod, float64(res.sent)))
	}
	r.section("5. WebServer burst and churn", b.String())
	r.target("5", fmt.Sprintf("burst of %d WebServers until all Deployments+Services exist and statuses are current (median of runs)", n), "<= 15 s", atMost(15), dh.figure(), secsF,
		fmt.Sprintf("%s (plain-client baseline %s: %.2fx)", dh.format(secsF), plain.format(secsF), ratio))
	r.info("6", "burst: reconciles / Deckhand requests per WebServer (last burst)",
		fmt.Sprintf("%.2f / %.2f", burstCost.reconciles["webserver"]/float64(n), burstCost.mgrRequests/float64(n)))
	r.target("5", "churn (10 changes/s): change -> Deployment updated p99", "<= 1 s", atMost(1), single(p99.Seconds()), secsF,
		fmt.Sprintf("%s (%d changes, %d not seen; plain-client baseline p99 %s)", secs(p99), res.sent, res.lost, ms(percentile(baseChurn.lat, 99))))
	r.target("5", "churn: changes that failed or whose Deployment update was never seen", "0", atMost(0), single(float64(res.lost+res.errs)),
		func(x float64) string { return fmt.Sprintf("%.0f", x) }, fmt.Sprintf("%d failed, %d never seen of %d", res.errs, res.lost, res.sent))
	if res.sent > 0 {
		r.info("6", "reconciles per WebServer spec change", fmt.Sprintf("%.2f", churnCost.reconciles["webserver"]/float64(res.sent)))
	}
	return nil
}

// burstOrder prints the order of the bursts.
func burstOrder(variants []string) []string {
	var names []string
	for i := range burstRounds {
		names = append(names, interleaved(variants, i)...)
	}
	return names
}

// msOf is the p-th percentile of millisecond figures, printed.
func msOf(xs []float64, p float64) string {
	d := make([]time.Duration, len(xs))
	for i, x := range xs {
		d[i] = time.Duration(x * float64(time.Millisecond))
	}
	return ms(percentile(d, p))
}

// msOfMean is the mean of xs (milliseconds), formatted as ms formats.
func msOfMean(xs []float64) string {
	if len(xs) == 0 {
		return ms(0)
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return ms(time.Duration(sum / float64(len(xs)) * float64(time.Millisecond)))
}
