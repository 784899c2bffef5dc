package main

// Item 7: an in-place sidecar image rollout by Deckhand's SidecarSet beside
// the same rollout by OpenKruise's, on as many pods each, in a cluster of
// their own.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

const (
	// rolloutNode is the cluster's kwok node: the pods are bound to it at
	// creation, so the scheduler plays no part.
	rolloutNode = "kwok-node-0"
	// rolloutTimeout bounds each wait of the item (pods Ready, a rollout).
	rolloutTimeout = 10 * time.Minute
)

// rolloutMaxUnavailable is both SidecarSets' updateStrategy.maxUnavailable.
var rolloutMaxUnavailable = intstr.FromString("10%")

// rolloutSide is one manager's SidecarSet and pods.
type rolloutSide struct {
	manager string
	ns, app string
	// ss is the SidecarSet (unstructured: Deckhand's and Kruise's keep the
	// sidecar's image and the status figures at the same paths).
	ss *unstructured.Unstructured
	// version is the sidecar image's current major version.
	version int
}

func (s *rolloutSide) image() string {
	return fmt.Sprintf("registry.example.com/logging/agent:%d.0", s.version)
}

// rolloutResult is one rollout's times from the image change.
type rolloutResult struct {
	manager string
	// pods: every pod runs the new sidecar image, Ready; status: the
	// SidecarSet's status says every pod is updated and Ready.
	pods, status time.Duration
}

// benchRollout: item 7.
func benchRollout(ctx context.Context, cfg *config, r *report) error {
	skip, err := kruiseMissing(cfg)
	if err != nil {
		return err
	}
	if skip != "" {
		r.info("7", "in-place sidecar image rollout, Deckhand vs OpenKruise", "not measured: "+skip)
		return nil
	}
	// A cluster of its own with every client limit raised, as cluster B:
	// the rollouts then do not share the machine with cluster B's 10,000
	// pods, and Kruise runs only here and in the other items' own phases.
	opts := localcluster.Full(1)
	opts.ClientQPS, opts.ClientBurst = 1000, 2000
	e, err := startEnv(ctx, cfg, "rollout", opts, nil)
	if err != nil {
		return err
	}
	defer e.stop()
	k, err := startKruise(ctx, e.cluster, benchKruiseOptions(cfg))
	if err != nil {
		return err
	}
	defer k.stop()
	n := cfg.size(1000, 100)

	deckhand, err := newDeckhandRolloutSide(ctx, e)
	if err != nil {
		return err
	}
	kruise := &rolloutSide{manager: "OpenKruise", ns: "rollout-kruise", app: "rollout-kruise", version: 1}
	if err := kruiseNamespace(ctx, e.cs, kruise.ns); err != nil {
		return err
	}
	if kruise.ss, err = kruiseSidecarSet("rollout", kruise.app, rolloutSidecar(kruise), rolloutMaxUnavailable); err != nil {
		return err
	}
	if err := e.c.Create(ctx, kruise.ss); err != nil {
		return fmt.Errorf("creating Kruise's SidecarSet: %w", err)
	}
	for _, s := range []*rolloutSide{deckhand, kruise} {
		if err := createRolloutPods(ctx, e, s, n); err != nil {
			return fmt.Errorf("%s: %w", s.manager, err)
		}
	}
	settle()

	var results []rolloutResult
	for _, s := range []*rolloutSide{deckhand, kruise, kruise, deckhand} {
		res, err := rollOut(ctx, e, s, n)
		if err != nil {
			return fmt.Errorf("%s rollout to %s: %w", s.manager, s.image(), err)
		}
		results = append(results, res)
		logf("[rollout] %s: %d pods run %s Ready after %s, status after %s", s.manager, n, s.image(), secs(res.pods), secs(res.status))
		settle()
	}
	rolloutReport(r, results, n, k)
	return nil
}

// rolloutSidecar is the sidecar container at the side's current image.
func rolloutSidecar(s *rolloutSide) corev1.Container {
	c := sidecarContainer()
	c.Image = s.image()
	return c
}

// newDeckhandRolloutSide creates Deckhand's namespace and SidecarSet.
func newDeckhandRolloutSide(ctx context.Context, e *env) (*rolloutSide, error) {
	s := &rolloutSide{manager: "Deckhand", ns: "rollout-deckhand", app: "rollout-deckhand", version: 1}
	if err := e.namespace(ctx, s.ns); err != nil {
		return nil, err
	}
	ss := benchSidecarSet("rollout", s.app)
	ss.Spec.Containers[0].Container = rolloutSidecar(s)
	ss.Spec.UpdateStrategy.MaxUnavailable = &rolloutMaxUnavailable
	if err := e.c.Create(ctx, ss); err != nil {
		return nil, fmt.Errorf("creating Deckhand's SidecarSet: %w", err)
	}
	s.ss = &unstructured.Unstructured{}
	s.ss.SetGroupVersionKind(deckhandv1alpha1.GroupVersion.WithKind("SidecarSet"))
	s.ss.SetName(ss.Name)
	return s, nil
}

// rolloutPod is a pod of the side, bound to the kwok node.
func rolloutPod(s *rolloutSide, name string) *corev1.Pod {
	p := kruiseSmokePod(s.ns, name, s.app)
	p.Spec.NodeName = rolloutNode
	return p
}

// createRolloutPods waits until the side's webhook injects its SidecarSet
// (a dry-run pod shows it), creates n pods, checks each got the sidecar and
// waits until all are Ready.
func createRolloutPods(ctx context.Context, e *env, s *rolloutSide, n int) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p := rolloutPod(s, "probe")
		if err := e.c.Create(ctx, p, client.DryRunAll); err != nil {
			return false, nil
		}
		return sidecarImage(p.Spec.Containers, "log-agent") == s.image(), nil
	})
	if err != nil {
		return fmt.Errorf("the webhook never injected the sidecar: %w", err)
	}
	tr, err := trackPods(ctx, e.cs, s.ns)
	if err != nil {
		return err
	}
	defer tr.close()
	start := time.Now()
	if err := runWorkers(n, 16, func(i int) error {
		p := rolloutPod(s, fmt.Sprintf("pod-%05d", i))
		if err := e.c.Create(ctx, p); err != nil {
			return err
		}
		if sidecarImage(p.Spec.Containers, "log-agent") != s.image() {
			return fmt.Errorf("pod %s created without the sidecar", p.Name)
		}
		return nil
	}); err != nil {
		return err
	}
	took, err := tr.waitFor(ctx, start, rolloutTimeout, fmt.Sprintf("%d pods Ready", n), func(_, ready int) bool { return ready >= n })
	if err != nil {
		return err
	}
	logf("[rollout] %s: %d pods with the sidecar Ready after %s", s.manager, n, secs(took))
	return nil
}

// runsSidecar reports whether the pod runs image in its sidecar container,
// ready, and is Ready itself.
func runsSidecar(image string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		for _, c := range p.Status.ContainerStatuses {
			if c.Name == "log-agent" {
				return c.Image == image && c.Ready && podutil.IsPodReady(p)
			}
		}
		return false
	}
}

// rollOut changes the side's sidecar image and times, from the change, the
// pods (an informer on its namespace: every pod runs the new image, Ready)
// and the SidecarSet's status (observedGeneration current, every matched
// pod updated and Ready), both the same way for Deckhand and Kruise.
func rollOut(ctx context.Context, e *env, s *rolloutSide, n int) (rolloutResult, error) {
	s.version++
	res := rolloutResult{manager: s.manager}
	tr, err := trackPodsWith(ctx, e.cs, s.ns, runsSidecar(s.image()))
	if err != nil {
		return res, err
	}
	defer tr.close()
	start := time.Now()
	if err := setSidecarImage(ctx, e.c, s.ss, s.image()); err != nil {
		return res, err
	}
	gen := s.ss.GetGeneration()
	status := s.ss.DeepCopy()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, rolloutTimeout, true, func(ctx context.Context) (bool, error) {
		if _, done := tr.counts(); res.pods == 0 && done >= n {
			res.pods = time.Since(start)
		}
		if res.status == 0 && e.c.Get(ctx, client.ObjectKeyFromObject(status), status) == nil && statusUpdated(status, gen, n) {
			res.status = time.Since(start)
		}
		return res.pods > 0 && res.status > 0, nil
	})
	if err != nil {
		total, done := tr.counts()
		st, _, _ := unstructured.NestedMap(status.Object, "status")
		return res, errors.Join(err, fmt.Errorf("%d of %d pods run the new sidecar; SidecarSet status %v", done, total, st))
	}
	return res, nil
}

// statusUpdated reports whether a SidecarSet's status (Deckhand's or Kruise's:
// the same fields) says its generation gen reached all n pods, Ready.
func statusUpdated(ss *unstructured.Unstructured, gen int64, n int) bool {
	observed, _, _ := unstructured.NestedInt64(ss.Object, "status", "observedGeneration")
	matched, _, _ := unstructured.NestedInt64(ss.Object, "status", "matchedPods")
	updatedReady, _, _ := unstructured.NestedInt64(ss.Object, "status", "updatedReadyPods")
	return observed >= gen && matched == int64(n) && updatedReady == int64(n)
}

// rolloutReport writes item 7's section, summary rows and raw results.
func rolloutReport(r *report, results []rolloutResult, n int, k *kruiseManager) {
	raw := byManager{}
	for _, x := range results {
		raw.add(x.manager, "pods_s", x.pods.Seconds())
		raw.add(x.manager, "status_s", x.status.Seconds())
	}
	r.record("rollout-vs-kruise", raw)
	d, kr := raw["Deckhand"], raw["OpenKruise"]
	var order []string
	for _, x := range results {
		order = append(order, x.manager)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "A cluster of its own, with every limit off as in cluster B (kube-controller-manager and kube-scheduler at QPS 1000/burst 2000, Deckhand without a client-side limit, "+
		"kruise-manager v1.9.1 at QPS 1000/burst 2000: it cannot turn its limit off, docs/bench-kruise.md), so that the rollouts do not share the machine with cluster B's 10,000 pods. "+
		"One kwok node makes pods Running and Ready; its stages restart a container whose spec image changed, after 500 ms, with a new `imageID` (what a kubelet does for an in-place update). "+
		"Deckhand's SidecarSet selects %d pods in one namespace, OpenKruise's %d pods in another (labelled for its webhook); each injected its `log-agent` sidecar at pod creation. "+
		"Both SidecarSets roll image changes out with `maxUnavailable: %s`, 3 workers each (with 500 ms a restart, ten batches make a floor of about 5 s for OpenKruise; "+
		"Deckhand takes each pod out of its endpoints first, at its defaults: the readiness gate written False, the pod seen not Ready, `inPlaceUpdateGracePeriodSeconds` 1 s, then the restart, then the gate written True, "+
		"a floor of about 15 s; OpenKruise's SidecarSet restarts a Ready pod's sidecar without taking it out). Then the sidecar image changes on one SidecarSet at a time, in the order %s, "+
		"the other manager idle (its pods unchanged). Measured from the image change: until every pod runs the new sidecar image with the container and the pod Ready "+
		"(the same pod informer for both), and until the SidecarSet's status says so (`observedGeneration` current, `matchedPods` and `updatedReadyPods` at %d: the two status fields mean the same in both). "+
		"What differs: Kruise runs as the cluster's admin, with every Kruise controller (CloneSet, Advanced StatefulSet, ...) watching as in a real installation; "+
		"Deckhand runs as its own ServiceAccount; its SidecarSet controller batches pod events for a second (`DefaultPodEventDelay`), "+
		"except a pod Ready again after a container restart, which is reconciled at once, so a batch waits only for the restart.\n\n",
		n, n, rolloutMaxUnavailable.String(), strings.Join(order, " → "), n)
	b.WriteString("| rollout | manager | image change → every pod runs it, Ready | image change → SidecarSet status says so |\n|---|---|---|---|\n")
	for i, x := range results {
		fmt.Fprintf(&b, "| %d | %s | %s | %s |\n", i+1, x.manager, secs(x.pods), secs(x.status))
	}
	secText := func(x float64) string { return fmt.Sprintf("%.2f s", x) }
	dp, kp, ds, ks := spreadOf(d["pods_s"]), spreadOf(kr["pods_s"]), spreadOf(d["status_s"]), spreadOf(kr["status_s"])
	podsFig, statusFig := ratioFigure(dp, kp), ratioFigure(ds, ks)
	podsRatio, statusRatio := podsFig.Median, statusFig.Median
	b.WriteString("\n| figure (median, min–max) | Deckhand | OpenKruise | Deckhand / OpenKruise |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| every pod runs the new sidecar, Ready | %s | %s | %.2fx |\n", dp.format(secText), kp.format(secText), podsRatio)
	fmt.Fprintf(&b, "| the SidecarSet's status says so | %s | %s | %.2fx |\n", ds.format(secText), ks.format(secText), statusRatio)
	if errs := k.errorLines(); len(errs) > 0 {
		fmt.Fprintf(&b, "\nkruise-manager logged %d lines at error level; the first: `%s`\n", len(errs), firstLine(errs[0]))
	}
	r.section("7. In-place sidecar image rollout: Deckhand vs OpenKruise", b.String())
	r.target("7", fmt.Sprintf("in-place sidecar image rollout, %d pods, maxUnavailable %s: time until every pod runs it, Deckhand / OpenKruise", n, rolloutMaxUnavailable.String()), "<= 1.0x",
		atMost(1), podsFig, times, fmt.Sprintf("%.2fx (Deckhand %s, Kruise %s)", podsRatio, dp.format(secText), kp.format(secText)))
	r.info("7", "the same until the SidecarSet's status says so, Deckhand / OpenKruise",
		fmt.Sprintf("%.2fx (range %s; Deckhand %s, Kruise %s)", statusRatio, statusFig.rangeText(times), ds.format(secText), ks.format(secText)))
}
