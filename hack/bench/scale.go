package main

// Item 8, scale: the manager with tens of thousands of pods on hundreds of
// nodes. The cluster is etcd, kube-apiserver and kwok only: pods are created
// bound to a node (no scheduler) and matched by one SidecarSet, so every
// figure is Deckhand's own cost and not the control plane's.

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

// scaleStep is what one pod count measured.
type scaleStep struct {
	Pods       int     `json:"pods"`
	CreateSecs float64 `json:"createAndReadySeconds"`
	// QuietSecs is how long after settling the pods went on changing
	// (kwok's last status writes) before the measurements began.
	QuietSecs   float64   `json:"podWritesSettledSeconds"`
	SyncSecs    float64   `json:"startToSyncedSeconds"`
	RSSBytes    int64     `json:"rssBytes"`
	HeapAlloc   float64   `json:"liveHeapBytes"`
	HeapInuse   float64   `json:"heapInuseBytes"`
	AdmissionMs []float64 `json:"oneClientCreateMs"`
	// BaselineMs are the same creates in a namespace the pod webhook
	// does not see, alternating with the injected ones.
	BaselineMs []float64 `json:"oneClientCreateNoWebhookMs"`
	// NullMs are the same creates in a namespace where only the minimal
	// webhook of item 1 is called, adding the same sidecar: what calling any
	// injecting webhook costs the API server at this pod count.
	NullMs       []float64 `json:"oneClientCreateMinimalWebhookMs"`
	ConvergeSecs float64   `json:"statusConvergenceSeconds"`
	// ProbeCPUSecs is the CPU time the manager used while the probes ran:
	// whatever it spends then competes with the webhook for the machine.
	ProbeCPUSecs float64 `json:"managerCPUSecondsDuringProbes"`
	// ProbeReconciles and ProbeReconcileSecs are the SidecarSet
	// controller's reconciles while the probes ran and the time they took.
	ProbeReconciles    float64 `json:"sidecarSetReconcilesDuringProbes"`
	ProbeReconcileSecs float64 `json:"sidecarSetReconcileSecondsDuringProbes"`
	admission          []time.Duration
	baseline           []time.Duration
	null               []time.Duration
}

// ownAdded is the p50 latency Deckhand's webhook adds over the minimal
// webhook that adds the same sidecar: Deckhand's part of the added latency.
func (s *scaleStep) ownAdded() time.Duration {
	return percentile(s.admission, 50) - percentile(s.null, 50)
}

// added is the p50 latency the webhook adds to a create at this step.
func (s *scaleStep) added() time.Duration {
	return percentile(s.admission, 50) - percentile(s.baseline, 50)
}

// scaleSizes: the node count and the pod counts measured, smallest first.
func scaleSizes(cfg *config) (nodes int, steps []int) {
	if cfg.quick {
		return 5, []int{500, 1000}
	}
	return 500, []int{10000, 25000, 50000}
}

const (
	scaleNS      = "scale"
	scaleProbeNS = "scale-probe"
	// scaleNullLabel marks the probe pods in scaleBaselineNS that the
	// minimal webhook is called for (its objectSelector); Deckhand's pod
	// webhook never sees that namespace.
	scaleNullLabel = "bench.deckhand.dev/minimal-webhook"
	scaleApp       = "scale"
	scaleProbes    = 200
	scaleSidecars  = "scale-agent"
)

// benchScale: item 8.
func benchScale(ctx context.Context, cfg *config, r *report) error {
	nodes, steps := scaleSizes(cfg)
	e, err := startEnv(ctx, cfg, "scale", localcluster.Options{FakeNodes: nodes}, nil)
	if err != nil {
		return err
	}
	defer e.stop()
	for _, ns := range []string{scaleNS, scaleProbeNS} {
		if err := e.namespace(ctx, ns); err != nil {
			return err
		}
	}
	null, err := startNullWebhook(e.certDir)
	if err != nil {
		return err
	}
	defer null.srv.Close()
	null.inject.Store(true)
	null.namespaces, null.objectLabel = []string{scaleBaselineNS}, scaleNullLabel
	if err := null.install(ctx, e, true); err != nil {
		return err
	}
	// Paused: an image change then moves no pod, and what is timed is the
	// controller recomputing the status of every matched pod.
	ss := benchSidecarSet(scaleSidecars, scaleApp)
	ss.Spec.UpdateStrategy.Paused = true
	if err := e.c.Create(ctx, ss); err != nil {
		return err
	}
	if err := waitInjecting(ctx, e); err != nil {
		return err
	}
	// How many controllers the manager starts, learnt with no pods: at
	// 50,000 pods the first controllers were seen running long before the
	// ones waiting for the pod cache had even been added, and a wait for
	// "no new controller for 3 s" stopped there.
	empty, err := measureManager(ctx, cfg, e, "heap-scale-0", 0, nil)
	if err != nil {
		return err
	}
	tr, err := trackPods(ctx, e.cs, scaleNS)
	if err != nil {
		return err
	}
	defer tr.close()

	var results []*scaleStep
	created := 0
	for i, n := range steps {
		st := &scaleStep{Pods: n}
		t0 := time.Now()
		if err := runWorkers(n-created, 32, func(j int) error {
			k := created + j
			p := benchPod(scaleNS, fmt.Sprintf("pod-%06d", k), false)
			p.Labels["app"] = scaleApp
			p.Spec.NodeName = fmt.Sprintf("kwok-node-%d", k%nodes)
			_, err := e.cs.CoreV1().Pods(scaleNS).Create(ctx, p, metav1.CreateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("creating pods up to %d: %w", n, err)
		}
		created = n
		if _, err := tr.waitFor(ctx, t0, 60*time.Minute, fmt.Sprintf("%d pods Ready", n), func(_, ready int) bool { return ready >= n }); err != nil {
			return err
		}
		st.CreateSecs = time.Since(t0).Seconds()
		logf("[scale] %d pods on %d nodes Running and Ready after %s", n, nodes, secs(time.Since(t0)))
		settle()
		quiet, cpus, err := tr.waitQuiet(ctx, 30*time.Minute)
		if err != nil {
			return err
		}
		st.QuietSecs = quiet.Seconds()
		logf("[scale] %d pods: no pod changed and the machine quiet (%.2f CPUs busy) for %s after another %s", n, cpus, podsQuietFor, secs(quiet))

		f, err := measureManager(ctx, cfg, e, fmt.Sprintf("heap-scale-%d", n), empty.controls, nil)
		if err != nil {
			return err
		}
		st.SyncSecs, st.RSSBytes, st.HeapAlloc, st.HeapInuse = f.sync.Seconds(), f.rss, f.heapAlloc, f.heap
		before, err := managerWork(ctx, e)
		if err != nil {
			return err
		}
		if st.admission, st.null, st.baseline, err = oneClientCreates(ctx, e); err != nil {
			return err
		}
		after, err := managerWork(ctx, e)
		if err != nil {
			return err
		}
		st.ProbeCPUSecs = after.cpu - before.cpu
		st.ProbeReconciles, st.ProbeReconcileSecs = after.reconciles-before.reconciles, after.reconcileSecs-before.reconcileSecs
		// A profile of the same probes, in a run of their own so that the
		// profiler's cost stays out of the measured one.
		if err := profileProbes(ctx, cfg, e, fmt.Sprintf("cpu-scale-%d", n)); err != nil {
			return err
		}
		for i := range st.admission {
			st.AdmissionMs = append(st.AdmissionMs, msFloat(st.admission[i]))
			st.NullMs = append(st.NullMs, msFloat(st.null[i]))
			st.BaselineMs = append(st.BaselineMs, msFloat(st.baseline[i]))
		}
		conv, err := sidecarStatusConvergence(ctx, e, fmt.Sprintf("registry.example.com/logging/agent:%d", i+2), n)
		if err != nil {
			return err
		}
		st.ConvergeSecs = conv.Seconds()
		logf("[scale] %d pods: one-client create p50 %s, p99 %s (minimal webhook %s: Deckhand's part %s; without a webhook %s: added %s), manager CPU %.2f s during the probes (%.0f SidecarSet reconciles, %s each); status after an image change in %s",
			n, ms(percentile(st.admission, 50)), ms(percentile(st.admission, 99)), ms(percentile(st.null, 50)), ms(st.ownAdded()),
			ms(percentile(st.baseline, 50)), ms(st.added()), st.ProbeCPUSecs,
			st.ProbeReconciles, ms(st.reconcileMean()), secs(conv))
		results = append(results, st)
	}

	var peer *managerFigures
	skip, err := kruiseMissing(cfg)
	if err != nil {
		return err
	}
	if skip == "" {
		if peer, err = measureKruise(ctx, cfg, e); err != nil {
			return err
		}
	}
	r.record("scale", results)
	reportScale(r, results, nodes, peer, skip)
	return nil
}

// waitInjecting waits until the webhook injects the SidecarSet into a
// dry-run pod: the manager's cache holds it.
func waitInjecting(ctx context.Context, e *env) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p := benchPod(scaleProbeNS, "probe", false)
		p.Labels["app"] = scaleApp
		if err := e.c.Create(ctx, p, client.DryRunAll); err != nil {
			return false, nil
		}
		return len(p.Spec.Containers) == 3, nil
	})
}

// scaleBaselineNS is a namespace the pod webhook's namespaceSelector
// leaves out: a create there costs what a create costs without the webhook.
const scaleBaselineNS = "kube-system"

// oneClientCreates creates scaleProbes injected pods one at a time (no
// node: they stay Pending), each followed by the same pod in the namespace
// where Deckhand's webhook is not called, once labelled for the minimal
// webhook, which adds the same sidecar, and once with no webhook at all, and deletes them again. Alternating the
// three makes the differences of their medians what the webhooks add at
// this pod count, whatever the control plane's own latency is then.
func oneClientCreates(ctx context.Context, e *env) (injected, null, baseline []time.Duration, err error) {
	create := func(ns, name string, minimal bool) (time.Duration, int, error) {
		p := benchPod(ns, name, false)
		p.Labels["app"] = scaleApp
		if minimal {
			p.Labels[scaleNullLabel] = "true"
		}
		p.Spec.NodeName = ""
		t := time.Now()
		created, err := e.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			return 0, 0, err
		}
		return time.Since(t), len(created.Spec.Containers), nil
	}
	probes := []struct {
		ns, prefix string
		minimal    bool
		containers int
		into       *[]time.Duration
	}{{scaleProbeNS, "probe", false, 3, &injected}, {scaleBaselineNS, "minimal", true, 3, &null}, {scaleBaselineNS, "probe", false, 2, &baseline}}
	for i := range scaleProbes {
		for _, pr := range probes {
			name := fmt.Sprintf("%s-%03d", pr.prefix, i)
			d, n, err := create(pr.ns, name, pr.minimal)
			if err != nil {
				return nil, nil, nil, err
			}
			if n != pr.containers {
				return nil, nil, nil, fmt.Errorf("probe pod %s/%s has %d containers, want %d: a webhook is called where it should not be, or not where it should", pr.ns, name, n, pr.containers)
			}
			*pr.into = append(*pr.into, d)
		}
	}
	sel := metav1.ListOptions{LabelSelector: "app=" + scaleApp}
	for _, ns := range []string{scaleProbeNS, scaleBaselineNS} {
		if err := e.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, sel); err != nil {
			return nil, nil, nil, err
		}
	}
	return injected, null, baseline, nil
}

// reconcileMean is the SidecarSet controller's mean reconcile time while
// the probes ran.
func (s *scaleStep) reconcileMean() time.Duration {
	if s.ProbeReconciles == 0 {
		return 0
	}
	return time.Duration(s.ProbeReconcileSecs / s.ProbeReconciles * float64(time.Second))
}

// managerCounters is the manager's CPU time and its SidecarSet controller's
// reconcile count and total reconcile time, in seconds, so far.
type managerCounters struct{ cpu, reconciles, reconcileSecs float64 }

func managerWork(ctx context.Context, e *env) (managerCounters, error) {
	m, err := e.managerMetrics(ctx)
	if err != nil {
		return managerCounters{}, err
	}
	for _, name := range []string{"process_cpu_seconds_total", "controller_runtime_reconcile_time_seconds_count"} {
		if len(m[name]) == 0 {
			return managerCounters{}, fmt.Errorf("the manager's metrics have no %s", name)
		}
	}
	return managerCounters{
		cpu:           m.sum("process_cpu_seconds_total"),
		reconciles:    m.sum("controller_runtime_reconcile_time_seconds_count", "controller", "sidecarset"),
		reconcileSecs: m.sum("controller_runtime_reconcile_time_seconds_sum", "controller", "sidecarset"),
	}, nil
}

// profileProbes saves a CPU profile of the manager taken while the
// one-client probes run again; their figures are not kept.
func profileProbes(ctx context.Context, cfg *config, e *env, name string) error {
	if e.pprofPort == 0 {
		return nil
	}
	return e.profileWhile(ctx, cfg, name, func() error {
		_, _, _, err := oneClientCreates(ctx, e)
		return err
	})
}

// sidecarStatusConvergence changes the paused SidecarSet's image and times
// until its status describes the new revision for all n matched pods.
func sidecarStatusConvergence(ctx context.Context, e *env, image string, n int) (time.Duration, error) {
	ss := &deckhandv1alpha1.SidecarSet{}
	if err := e.c.Get(ctx, client.ObjectKey{Name: scaleSidecars}, ss); err != nil {
		return 0, err
	}
	before := ss.Status.LatestRevision
	orig := ss.DeepCopy()
	ss.Spec.Containers[0].Image = image
	t0 := time.Now()
	if err := e.c.Patch(ctx, ss, client.MergeFrom(orig)); err != nil {
		return 0, err
	}
	gen := ss.Generation
	var last deckhandv1alpha1.SidecarSetStatus
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		cur := &deckhandv1alpha1.SidecarSet{}
		if err := e.c.Get(ctx, client.ObjectKey{Name: scaleSidecars}, cur); err != nil {
			return false, err
		}
		last = cur.Status
		return last.ObservedGeneration >= gen && last.LatestRevision != before && int(last.MatchedPods) >= n && last.UpdatedPods == 0, nil
	})
	if err != nil {
		return 0, fmt.Errorf("SidecarSet status after the image change: %+v: %w", last, err)
	}
	return time.Since(t0), nil
}

func reportScale(r *report, steps []*scaleStep, nodes int, peer *managerFigures, skip string) {
	var b strings.Builder
	fmt.Fprintf(&b, "etcd, kube-apiserver and kwok with %d fake nodes (no scheduler, no kube-controller-manager: pods are created bound to a node, round robin, and kwok makes them Running and Ready). "+
		"One SidecarSet matches every pod and injects its sidecar at creation; its rollout is paused. At each pod count, once no pod has changed for %s and the whole machine used less than %.1f CPU over that time (kwok writes the resources each container runs with after the pod is Ready; the time this took is the \"then quiet after\" column): a fresh manager, measured as in item 3 (caches synced, RSS, live heap after a forced collection); "+
		"then %d injected pods created one at a time in another namespace (latency of each create, the webhook included), each followed by the same pod in kube-system, where Deckhand's pod webhook is not called, once with a label for which item 1's minimal webhook adds the same sidecar (what calling any injecting webhook costs the API server at that pod count) and once without (no webhook: the control plane's own latency), and deleted; then the SidecarSet's image is changed and timed until its status names the new revision for every matched pod "+
		"(observedGeneration, latestRevision, matchedPods, updatedPods 0).\n\n", nodes, podsQuietFor, quietMachineCPU, scaleProbes)
	b.WriteString("| pods | create -> all Ready | then quiet after | caches synced | RSS | live heap | heap in use | one-client create p50 | p99 | p50, minimal webhook | p50, no webhook | added by a webhook (p50) | Deckhand's part (p50 over the minimal webhook) | manager CPU during the probes | SidecarSet reconciles then (mean time) | status after an image change |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "| %d | %.1f s | %.1f s | %.2f s | %.1f MiB | %.1f MiB | %.1f MiB | %s | %s | %s | %s | %s | %s | %.2f s | %.0f (%s) | %.2f s |\n", s.Pods, s.CreateSecs, s.QuietSecs, s.SyncSecs,
			mib(float64(s.RSSBytes)), mib(s.HeapAlloc), mib(s.HeapInuse), ms(percentile(s.admission, 50)), ms(percentile(s.admission, 99)),
			ms(percentile(s.null, 50)), ms(percentile(s.baseline, 50)), ms(s.added()), ms(s.ownAdded()), s.ProbeCPUSecs, s.ProbeReconciles, ms(s.reconcileMean()), s.ConvergeSecs)
	}
	first, last := steps[0], steps[len(steps)-1]
	perPod := (last.HeapAlloc - first.HeapAlloc) / float64(last.Pods-first.Pods)
	// Flat: the webhook adds at most 20% more at the largest step than at
	// the smallest, or at most 0.5 ms more (a difference of two medians of
	// a few milliseconds moves by more than 20% of itself between runs).
	// Judged on Deckhand's part: what calling any injecting webhook costs
	// the API server grows with its own load (the minimal webhook's column).
	grew := last.ownAdded() - first.ownAdded()
	// At most 1.2x the first step's part is at most 0.2x of it more.
	flatBound := max(500*time.Microsecond, first.ownAdded()*2/10)
	if peer != nil {
		fmt.Fprintf(&b, "\nOpenKruise's kruise-manager on the same cluster with %d pods (Deckhand's manager stopped), measured the same way: caches synced %s, RSS %.1f MiB, live heap %.1f MiB, heap in use %.1f MiB.\n",
			peer.pods, secs(peer.sync), mib(float64(peer.rss)), mib(peer.heapAlloc), mib(peer.heap))
	} else {
		fmt.Fprintf(&b, "\nOpenKruise not measured: %s\n", skip)
	}
	r.section("8. Scale", b.String())
	bytesText := func(x float64) string { return fmt.Sprintf("%.0f B", x) }
	r.target("8", fmt.Sprintf("live heap per cached pod, %d -> %d pods on %d nodes (marginal)", first.Pods, last.Pods, nodes), "<= 4 KB", atMost(4000), single(perPod), bytesText,
		bytesText(perPod))
	msText := func(x float64) string { return fmt.Sprintf("%.2f ms", x) }
	r.target("8", fmt.Sprintf("one-client create p50 added by Deckhand's webhook over the minimal one at %d pods, against %d pods", last.Pods, first.Pods), "flat (<= 1.2x or +0.5 ms)",
		atMost(msFloat(flatBound)), single(msFloat(grew)), msText,
		fmt.Sprintf("%s vs %s (grew %s, allowed %s)", ms(last.ownAdded()), ms(first.ownAdded()), ms(grew), ms(flatBound)))
	r.info("8", fmt.Sprintf("one-client create p50 added by a webhook (over none) at %d pods / at %d pods: Deckhand's, the minimal one's", last.Pods, first.Pods),
		fmt.Sprintf("%s / %s, %s / %s", ms(last.added()), ms(first.added()),
			ms(percentile(last.null, 50)-percentile(last.baseline, 50)), ms(percentile(first.null, 50)-percentile(first.baseline, 50))))
	r.info("8", fmt.Sprintf("one-client create p50 with the webhook at %d pods / at %d pods (the control plane's latency included)", last.Pods, first.Pods),
		fmt.Sprintf("%.2f (%s vs %s)", percentile(last.admission, 50).Seconds()/percentile(first.admission, 50).Seconds(), ms(percentile(last.admission, 50)), ms(percentile(first.admission, 50))))
	r.info("8", fmt.Sprintf("manager at %d pods: RSS, live heap, start -> synced, status after an image change", last.Pods),
		fmt.Sprintf("%.1f MiB, %.1f MiB, %.2f s, %.2f s", mib(float64(last.RSSBytes)), mib(last.HeapAlloc), last.SyncSecs, last.ConvergeSecs))
	if peer != nil {
		r.info("8", fmt.Sprintf("RSS at %d pods, Deckhand / OpenKruise", last.Pods),
			fmt.Sprintf("%.2fx (%.1f MiB vs %.1f MiB)", float64(last.RSSBytes)/float64(peer.rss), mib(float64(last.RSSBytes)), mib(float64(peer.rss))))
	}
}
