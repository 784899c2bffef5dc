package main

// Item 8, scale: the manager with tens of thousands of pods on hundreds of
// nodes. The cluster is etcd, kube-apiserver and kwok only: pods are created
// bound to a node (no scheduler) and matched by one SidecarSet, so every
// figure is Deckhand's own cost and not the control plane's.

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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
	QuietSecs float64   `json:"podWritesSettledSeconds"`
	SyncSecs  float64   `json:"startToSyncedSeconds"`
	RSSBytes  int64     `json:"rssBytes"`
	HeapAlloc float64   `json:"liveHeapBytes"`
	HeapInuse float64   `json:"heapInuseBytes"`
	Admission latencies `json:"oneClientCreateMs"`
	// Baseline are the same creates in a namespace the pod webhook
	// does not see, alternating with the injected ones.
	Baseline latencies `json:"oneClientCreateNoWebhookMs"`
	// Null are the same creates in a namespace where only the minimal
	// webhook of item 1 is called, adding the same sidecar: what calling any
	// injecting webhook costs the API server at this pod count.
	Null         latencies `json:"oneClientCreateMinimalWebhookMs"`
	ConvergeSecs float64   `json:"statusConvergenceSeconds"`
	// ProbeCPUSecs is the CPU time the manager used while the probes ran:
	// whatever it spends then competes with the webhook for the machine.
	ProbeCPUSecs float64 `json:"managerCPUSecondsDuringProbes"`
	// ProbeReconciles and ProbeReconcileSecs are the SidecarSet
	// controller's reconciles while the probes ran and the time they took.
	ProbeReconciles    float64 `json:"sidecarSetReconcilesDuringProbes"`
	ProbeReconcileSecs float64 `json:"sidecarSetReconcileSecondsDuringProbes"`
}

// ownAdded is the p50 latency Deckhand's webhook adds over the minimal
// webhook that adds the same sidecar: Deckhand's part of the added latency.
func (s *scaleStep) ownAdded() time.Duration {
	return percentile(s.Admission, 50) - percentile(s.Null, 50)
}

// added is the p50 latency the webhook adds to a create at this step.
func (s *scaleStep) added() time.Duration {
	return percentile(s.Admission, 50) - percentile(s.Baseline, 50)
}

// scaleSizes: the node count and the pod counts measured, smallest first.
// A fake node takes at most scalePodsPerNode pods, so that 150,000 pods
// (Kubernetes' published limit, with 5,000 nodes) spread as a real
// cluster's would rather than crowding 500 nodes.
func scaleSizes(cfg *config) (nodes int, steps []int) {
	if cfg.quick {
		return 5, []int{500, 1000}
	}
	steps = cfg.scalePods
	return max(500, (steps[len(steps)-1]+scalePodsPerNode-1)/scalePodsPerNode), steps
}

// scalePodsPerNode is the most pods the scale item puts on one fake node:
// the kubelet's default maxPods (110), rounded down.
const scalePodsPerNode = 100

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
		if st.Admission, st.Null, st.Baseline, err = oneClientCreates(ctx, e); err != nil {
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
		conv, err := sidecarStatusConvergence(ctx, e, fmt.Sprintf("registry.example.com/logging/agent:%d", i+2), n)
		if err != nil {
			return err
		}
		st.ConvergeSecs = conv.Seconds()
		logf("[scale] %d pods: one-client create p50 %s, p99 %s (minimal webhook %s: Deckhand's part %s; without a webhook %s: added %s), manager CPU %.2f s during the probes (%.0f SidecarSet reconciles, %s each); status after an image change in %s",
			n, ms(percentile(st.Admission, 50)), ms(percentile(st.Admission, 99)), ms(percentile(st.Null, 50)), ms(st.ownAdded()),
			ms(percentile(st.Baseline, 50)), ms(st.added()), st.ProbeCPUSecs,
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
