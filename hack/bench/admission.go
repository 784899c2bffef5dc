package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

const admissionNode = "fake-node-0"

type admVariant string

const (
	admNone    admVariant = "no webhook"
	admPre     admVariant = "no webhook, sidecar already in the pod"
	admNull    admVariant = "null webhook (admits, no patch)"
	admNullInj admVariant = "null webhook adding the sidecar"
	admOne     admVariant = "1 SidecarSet"
	admHundred admVariant = "100 SidecarSets (1 matches)"
	// admPolicy is the same SidecarSet in Policy mode: the API server
	// injects the sidecar itself through the MutatingAdmissionPolicy
	// Deckhand compiled; Deckhand's pod webhook is not registered, as in an
	// installation with --sidecarset-pod-webhook=false.
	admPolicy admVariant = "1 SidecarSet, Policy mode (MutatingAdmissionPolicy)"
	// admKruise is OpenKruise's manager injecting the same sidecar with one
	// SidecarSet of its own, into a namespace only its webhook sees.
	admKruise admVariant = "OpenKruise, 1 SidecarSet"
)

// kruiseBenchSidecarSet is the name of the admission item's Kruise SidecarSet.
const kruiseBenchSidecarSet = "bench-kruise"

type admResult struct {
	lat     []time.Duration
	elapsed time.Duration
	pods    int
	runs    []float64 // throughput of each run
	p50s    []float64 // p50 latency of each run, ms
	mgrReq  float64   // the manager's API requests during the runs
	writes  float64   // API writes (all clients) during the runs
	// seq are the latencies of creates sent one at a time (an idle control
	// plane): what the webhook adds to one request, without queueing.
	seq []time.Duration
	// seqP50s is the p50 of each run's one-client creates, ms.
	seqP50s []float64
	// cpu is the CPU time each process (and the whole machine) used
	// during the 16-client runs.
	cpu cpuSnapshot
	// checked and mismatched count the measured pods checked for the
	// variant's injection after their runs, and those not injected so.
	checked, mismatched int
}

func (a *admResult) throughput() float64 { return float64(a.pods) / a.elapsed.Seconds() }

// benchAdmission: item 1. Its own cluster: etcd (--unsafe-no-fsync) and
// kube-apiserver only, so that nothing but the benchmark touches the pods
// (no scheduler, no kubelet, no controller-manager); the Deckhand manager
// runs as a process and serves the pod webhook.
func benchAdmission(ctx context.Context, cfg *config, r *report) error {
	e, err := startEnv(ctx, cfg, "admission", localcluster.Options{}, nil)
	if err != nil {
		return err
	}
	defer e.stop()
	skipKruise, err := kruiseMissing(cfg)
	if err != nil {
		return err
	}
	var k *kruiseManager
	if skipKruise == "" {
		// One Kruise for the whole item, its pod webhook limited to the
		// namespaces of the Kruise runs.
		if k, err = startKruise(ctx, e.cluster, benchKruiseOptions(cfg)); err != nil {
			return err
		}
		defer k.stop()
		logf("[admission] kruise-manager serving after %s, SidecarSet workers after %s", secs(k.serving), secs(k.working))
	}
	// A fake node: a Node object nothing runs. Pods are pre-bound to it
	// (spec.nodeName), so they skip the scheduler and nothing updates them.
	if err := e.c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: admissionNode}}); err != nil {
		return err
	}
	n, clients := cfg.size(2000, 300), 16
	nSeq := cfg.size(300, 60)
	// A B ... B A, twice (A ... once at the quick size): four runs a variant,
	// each variant as often early as late.
	forward := []admVariant{admNone, admPre, admNull, admNullInj, admOne, admPolicy, admKruise, admHundred}
	backward := slices.Clone(forward)
	slices.Reverse(backward)
	order := slices.Concat(forward, backward, forward, backward)
	if cfg.quick {
		order = forward
	}
	if k == nil {
		order = slices.DeleteFunc(order, func(v admVariant) bool { return v == admKruise })
	}
	null, err := startNullWebhook(e.certDir)
	if err != nil {
		return err
	}
	defer null.srv.Close()
	res := map[admVariant]*admResult{}
	for round, v := range order {
		ns := fmt.Sprintf("adm-%d", round)
		if err := prepareVariant(ctx, e, k, null, v, ns); err != nil {
			return err
		}
		s0, err := e.scrape(ctx)
		if err != nil {
			return err
		}
		k0 := kruiseRequests(ctx, k)
		cpu0, err := readCPU()
		if err != nil {
			return err
		}
		lat, elapsed, err := createPods(ctx, e, ns, n, clients, v == admPre)
		if err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
		cpu1, err := readCPU()
		if err != nil {
			return err
		}
		s1, err := e.scrape(ctx)
		if err != nil {
			return err
		}
		c := diff(s0, s1)
		if v == admKruise { // the injecting manager's requests
			c.mgrRequests = kruiseRequests(ctx, k) - k0
		}
		ar := res[v]
		if ar == nil {
			ar = &admResult{cpu: cpuSnapshot{}}
			res[v] = ar
		}
		ar.cpu.add(cpu1.sub(cpu0))
		ar.lat = append(ar.lat, lat...)
		ar.elapsed += elapsed
		ar.pods += n
		ar.runs = append(ar.runs, float64(n)/elapsed.Seconds())
		ar.p50s = append(ar.p50s, msFloat(percentile(lat, 50)))
		ar.mgrReq += c.mgrRequests
		ar.writes += c.apiMutating
		logf("[admission] %s: %d pods in %s (%.0f/s), p50 %s p99 %s", v, n, secs(elapsed), float64(n)/elapsed.Seconds(),
			ms(percentile(lat, 50)), ms(percentile(lat, 99)))
		if err := verifyRun(ctx, e, r, res, ns, v, n); err != nil {
			return err
		}
		if err := e.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
			return err
		}
		// The same variant, one create at a time, in a namespace of its own.
		seqNS := ns + "-seq"
		if err := admissionNamespace(ctx, e, seqNS, v); err != nil {
			return err
		}
		seq, _, err := createPods(ctx, e, seqNS, nSeq, 1, v == admPre)
		if err != nil {
			return fmt.Errorf("%s, one client: %w", v, err)
		}
		if err := verifyRun(ctx, e, r, res, seqNS, v, nSeq); err != nil {
			return err
		}
		ar.seq = append(ar.seq, seq...)
		ar.seqP50s = append(ar.seqP50s, msFloat(percentile(seq, 50)))
		logf("[admission] %s, one client: %d pods, p50 %s p99 %s", v, nSeq, ms(percentile(seq, 50)), ms(percentile(seq, 99)))
		if err := e.cs.CoreV1().Pods(seqNS).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{}); err != nil {
			return err
		}
	}
	if err := profileInjection(ctx, cfg, e, k, null, n, clients); err != nil {
		return err
	}

	var b strings.Builder
	fmt.Fprintf(&b, "Cluster: etcd `--unsafe-no-fsync` + kube-apiserver only; the Deckhand manager as a process (all controllers and webhooks). "+
		"%d pods per run, %d concurrent clients, no client-side rate limit, pods pre-bound to a fake Node (`spec.nodeName`). "+
		"Run order %s (the variants are interleaved so that drift in machine load hits them alike); throughput is the median of a variant's runs, latency percentiles pool them. "+
		"After each run every measured pod is listed and checked for its variant's injection (the sidecar once, and Deckhand's injection record or Kruise's hash annotation where they inject; none of them where nothing injects): "+
		"a pod webhook that fails open admits pods unchanged, and any pod not injected as its variant injects fails the item.\n\n",
		n, clients, joinVariants(order))
	b.WriteString("| variant | pods | creates/s (per run) | creates/s (median) | p50 | p99 | throughput vs none (medians) | manager requests per pod (Deckhand's; Kruise's in its row) | API writes per pod | pods checked / not injected as the variant injects |\n|---|---|---|---|---|---|---|---|---|---|\n")
	base := res[admNone]
	variants := []admVariant{admNone, admPre, admNull, admNullInj, admOne, admPolicy, admHundred}
	if k != nil {
		variants = append(variants, admKruise)
	}
	for _, v := range variants {
		a := res[v]
		var runs []string
		for _, x := range a.runs {
			runs = append(runs, fmt.Sprintf("%.0f", x))
		}
		tp, baseTP := spreadOf(a.runs).Median, spreadOf(base.runs).Median
		fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %s | %s | %.2fx | %.2f | %.2f | %d / %d |\n", v, a.pods, strings.Join(runs, ", "), tp,
			ms(percentile(a.lat, 50)), ms(percentile(a.lat, 99)), tp/baseTP, a.mgrReq/float64(a.pods), a.writes/float64(a.pods), a.checked, a.mismatched)
	}
	fmt.Fprintf(&b, "\nThe same variants with **one client** (%d pods a run, each create sent after the previous returned): the latency a webhook adds to a request when nothing queues.\n\n"+
		"| variant | p50 | p90 | p99 | added p50 vs none |\n|---|---|---|---|---|\n", nSeq)
	for _, v := range variants {
		a := res[v]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", v, ms(percentile(a.seq, 50)), ms(percentile(a.seq, 90)), ms(percentile(a.seq, 99)),
			ms(percentile(a.seq, 50)-percentile(base.seq, 50)))
	}
	r.section("1. Pod admission with sidecar injection", b.String())

	one, hundred, pol, pre, nw, ni := res[admOne], res[admHundred], res[admPolicy], res[admPre], res[admNull], res[admNullInj]
	tpS := func(a *admResult) spread { return spreadOf(a.runs) }
	p50S := func(a *admResult) spread { return spreadOf(a.p50s) }
	seqS := func(a *admResult) spread { return spreadOf(a.seqP50s) }
	msText := func(x float64) string { return fmt.Sprintf("%.2f ms", x) }
	perSec := func(x float64) string { return fmt.Sprintf("%.0f/s", x) }

	// What Deckhand itself adds comes first: the ratio to a webhook that
	// injects the same sidecar with a constant patch leaves out what calling
	// any injecting webhook costs this control plane, and depends on Deckhand
	// alone; every other ratio of the item carries that cost too.
	own, ownSeq := ratioFigure(tpS(one), tpS(ni)), diffFigure(seqS(one), seqS(ni))
	lead := fmt.Sprintf("**What Deckhand itself adds.** Against the minimal webhook injecting the same sidecar with a constant patch (*%s*), "+
		"Deckhand with one SidecarSet runs at **%s** its throughput (medians of the runs, %s against %s; ratio range %s) and adds %s to its one-client p50 (range %s). "+
		"The rows below against *no webhook* also carry what calling any injecting webhook costs this control plane; the ratio to OpenKruise (further below) also carries OpenKruise's own handler and the machine.\n\n",
		admNullInj, times(own.Median), tpS(one).format(perSec), tpS(ni).format(perSec), own.rangeText(times), msText(ownSeq.Median), ownSeq.rangeText(msText))
	r.info("1", "what Deckhand itself adds: throughput, 1 SidecarSet / a minimal webhook injecting the same sidecar (medians of the runs)",
		fmt.Sprintf("%s (range %s; Deckhand %s, minimal webhook %s)", times(own.Median), own.rangeText(times), tpS(one).format(perSec), tpS(ni).format(perSec)))
	r.info("1", "what Deckhand itself adds: one-client p50, 1 SidecarSet - the minimal injecting webhook (medians of the runs)",
		fmt.Sprintf("%s (range %s)", msText(ownSeq.Median), ownSeq.rangeText(msText)))

	withWithout := ratioFigure(tpS(one), tpS(base))
	r.target("1", "throughput with injection (1 SidecarSet) / without (medians of the runs)", ">= 0.85", atLeast(0.85), withWithout, times,
		fmt.Sprintf("%s (%s vs %s)", times(withWithout.Median), tpS(one).format(perSec), tpS(base).format(perSec)))
	added := diffFigure(p50S(one), p50S(base))
	r.target("1", "added p50 latency (1 SidecarSet - none), 16 clients (medians of the runs' p50)", "<= 1 ms", atMost(1), added, msText, msText(added.Median))
	addedSeq := diffFigure(seqS(one), seqS(base))
	r.target("1", "added p50 latency (1 SidecarSet - none), one client (medians of the runs' p50)", "<= 1 ms", atMost(1), addedSeq, msText, msText(addedSeq.Median))
	// Little's law: with 16 requests always in flight, p50 follows
	// 16/throughput, so the added p50 at 16 clients is mostly the throughput
	// ratio seen again (see docs/benchmarks.md).
	r.note(fmt.Sprintf("Admission, 16 clients: p50 at a throughput ratio of 0.85 would be %s above the no-webhook p50 by queueing alone (Little's law: %d in flight / throughput).",
		ms(time.Duration(float64(clients)/(0.85*base.throughput())*float64(time.Second))-time.Duration(float64(clients)/base.throughput()*float64(time.Second))), clients))
	polRatio := ratioFigure(tpS(pol), tpS(one))
	r.target("1", "Policy mode throughput / webhook (1 SidecarSet each, 16 clients; medians of the runs)", ">= 1.0x", atLeast(1), polRatio, times,
		fmt.Sprintf("%s (Policy %s, webhook %s)", times(polRatio.Median), tpS(pol).format(perSec), tpS(one).format(perSec)))
	// Policy mode's added p50 is at most the webhook's when its one-client
	// p50 is at most the webhook's: the no-webhook p50 is the same for both.
	polSeq := diffFigure(seqS(pol), seqS(one))
	r.target("1", "Policy mode one-client p50 - the webhook's (added p50 at most the webhook's)", "<= 0 ms", atMost(0), polSeq, msText,
		fmt.Sprintf("%s (Policy %s, webhook %s)", msText(polSeq.Median), seqS(pol).format(msText), seqS(one).format(msText)))
	slower := ratioFigure(tpS(one), tpS(hundred))
	pct := func(x float64) string { return fmt.Sprintf("%+.1f%%", (x-1)*100) }
	r.target("1", "100 SidecarSets slower than 1 (throughput, medians of the runs)", "<= 10%", atMost(1.10), slower, pct,
		fmt.Sprintf("%s (%s vs %s)", pct(slower.Median), tpS(hundred).format(perSec), tpS(one).format(perSec)))
	tp := func(a *admResult) float64 { return tpS(a).Median }
	p50 := func(a *admResult) time.Duration { return percentile(a.lat, 50) }
	fmt.Fprintf(&b, "\nWhere the cost goes (each step against the one before it, ratio of the throughput medians and added pooled p50):\n\n"+
		"| step | from -> to | throughput | added p50 |\n|---|---|---|---|\n"+
		"| a third container in every pod (bigger objects to store, watch and decode) | none -> sidecar already in the pod | %.2fx | %s |\n"+
		"| calling a webhook at all | none -> null webhook | %.2fx | %s |\n"+
		"| the API server applying an injection patch | null webhook -> null webhook adding the sidecar | %.2fx | %s |\n"+
		"| Deckhand's injection instead of the minimal one | null webhook adding the sidecar -> 1 SidecarSet | %.2fx | %s |\n",
		tp(pre)/tp(base), ms(p50(pre)-p50(base)), tp(nw)/tp(base), ms(p50(nw)-p50(base)),
		tp(ni)/tp(nw), ms(p50(ni)-p50(nw)), tp(one)/tp(ni), ms(p50(one)-p50(ni)))
	admissionCPU(&b, r, res, variants)
	kruiseAdmission(&b, r, res, skipKruise)
	r.sections[len(r.sections)-1] = "## 1. Pod admission with sidecar injection\n\n" + lead + b.String()
	p50slower := percentile(hundred.lat, 50) - percentile(one.lat, 50)
	r.note(fmt.Sprintf("Admission: p50 with 100 SidecarSets minus p50 with 1: %s.", ms(p50slower)))
	return nil
}

// verifyRun checks the pods of a run of v in ns (n created) for v's
// injection, counts the result into res and the raw results, and fails the
// item on any pod not injected as v injects.
func verifyRun(ctx context.Context, e *env, r *report, res map[admVariant]*admResult, ns string, v admVariant, n int) error {
	checked, mismatched, first, err := checkInjection(ctx, e, ns, v, n)
	if err != nil {
		return err
	}
	a := res[v]
	a.checked, a.mismatched = a.checked+checked, a.mismatched+mismatched
	recordAdmission(r, res)
	if mismatched > 0 {
		return fmt.Errorf("%s: %d of %d measured pods in %s not injected as the variant injects, first %s", v, mismatched, checked, ns, first)
	}
	return nil
}

// prepareVariant sets the cluster up for variant v (webhooks, SidecarSets,
// policies) and checks in namespace ns that it injects as v should.
func prepareVariant(ctx context.Context, e *env, k *kruiseManager, null *nullWebhook, v admVariant, ns string) error {
	null.inject.Store(v == admNullInj)
	if err := null.install(ctx, e, v == admNull || v == admNullInj); err != nil {
		return err
	}
	if err := setAdmissionVariant(ctx, e, v); err != nil {
		return fmt.Errorf("%s: %w", v, err)
	}
	if k != nil {
		if err := setKruiseVariant(ctx, e, v == admKruise); err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
	}
	if err := admissionNamespace(ctx, e, ns, v); err != nil {
		return err
	}
	if err := probeInjection(ctx, e, ns, v, null); err != nil {
		return fmt.Errorf("%s: %w", v, err)
	}
	return nil
}

// profileInjection takes a CPU profile of the manager while it injects,
// in a run of its own after the measured ones: a profile taken during a
// measured run would slow Deckhand's runs and no other variant's.
func profileInjection(ctx context.Context, cfg *config, e *env, k *kruiseManager, null *nullWebhook, n, clients int) error {
	if e.pprofPort == 0 {
		return nil
	}
	const ns = "adm-profile"
	if err := prepareVariant(ctx, e, k, null, admOne, ns); err != nil {
		return err
	}
	if err := e.profileWhile(ctx, cfg, "cpu-admission", func() error {
		_, _, err := createPods(ctx, e, ns, n, clients, false)
		return err
	}); err != nil {
		return fmt.Errorf("profile run: %w", err)
	}
	return e.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{})
}

func joinVariants(v []admVariant) string {
	var s []string
	for _, x := range v {
		s = append(s, string(x))
	}
	return strings.Join(s, " → ")
}

func setAdmissionVariant(ctx context.Context, e *env, v admVariant) error {
	want := map[string]string{}
	mode := deckhandv1alpha1.WebhookInjection
	switch v {
	case admPolicy:
		want[benchMatchSidecarSet] = "bench"
		mode = deckhandv1alpha1.PolicyInjection
	case admOne:
		want[benchMatchSidecarSet] = "bench"
	case admHundred:
		want[benchMatchSidecarSet] = "bench"
		for i := 1; i < 100; i++ {
			want[fmt.Sprintf("bench-other-%02d", i)] = fmt.Sprintf("other-%d", i)
		}
	}
	var list deckhandv1alpha1.SidecarSetList
	if err := e.c.List(ctx, &list); err != nil {
		return err
	}
	have := map[string]bool{}
	for i := range list.Items {
		s := &list.Items[i]
		if _, ok := want[s.Name]; !ok {
			if err := e.c.Delete(ctx, s); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			continue
		}
		have[s.Name] = true
		if s.Spec.InjectionMode != mode {
			s.Spec.InjectionMode = mode
			if err := e.c.Update(ctx, s); err != nil {
				return err
			}
		}
	}
	for name, app := range want {
		if !have[name] {
			s := benchSidecarSet(name, app)
			s.Spec.InjectionMode = mode
			if err := e.c.Create(ctx, s); err != nil {
				return err
			}
		}
	}
	hooks := e.hooks
	if v != admOne && v != admHundred {
		hooks.Serves = func(path string) bool { return path != inject.PodWebhookPath }
	}
	if err := hooks.Install(ctx, e.cs); err != nil {
		return err
	}
	// Let the manager's informers see every SidecarSet before measuring.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var l deckhandv1alpha1.SidecarSetList
		if err := e.c.List(ctx, &l); err != nil {
			return false, nil
		}
		return len(l.Items) == len(want), nil
	}); err != nil {
		return err
	}
	return settlePolicies(ctx, e, v == admPolicy)
}

// settlePolicies does the garbage collector's part for the injection
// policies of deleted SidecarSets (this cluster runs no
// kube-controller-manager: a Policy-mode SidecarSet deleted between
// variants would leave its policy injecting into every later variant's
// pods), then waits until exactly the policy the variant needs exists:
// one in Policy mode, none otherwise.
func settlePolicies(ctx context.Context, e *env, policy bool) error {
	var sets deckhandv1alpha1.SidecarSetList
	if err := e.c.List(ctx, &sets); err != nil {
		return err
	}
	live := map[types.UID]bool{}
	for i := range sets.Items {
		live[sets.Items[i].UID] = true
	}
	orphaned := func(o metav1.Object) bool {
		ref := metav1.GetControllerOf(o)
		return ref != nil && ref.Kind == "SidecarSet" && !live[ref.UID]
	}
	api := e.cs.AdmissionregistrationV1()
	bindings, err := api.MutatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range bindings.Items {
		if b := &bindings.Items[i]; orphaned(b) {
			if err := api.MutatingAdmissionPolicyBindings().Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	policies, err := api.MutatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range policies.Items {
		if p := &policies.Items[i]; orphaned(p) {
			if err := api.MutatingAdmissionPolicies().Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	want := 0
	if policy {
		want = 1
	}
	var have int
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := api.MutatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		have = len(l.Items)
		return have == want, nil
	})
	if err != nil {
		return fmt.Errorf("%d injection policy bindings, want %d: %w", have, want, err)
	}
	return nil
}

// admissionCPU writes where the CPU went during the 16-client runs: each
// process's CPU time per created pod, pooled over a variant's runs.
func admissionCPU(b *strings.Builder, r *report, res map[admVariant]*admResult, variants []admVariant) {
	b.WriteString("\nCPU time per created pod during the 16-client runs (user + system from `/proc/<pid>/stat`, pooled over a variant's runs; *whole machine* is every CPU's busy time from `/proc/stat`, on a machine running nothing else):\n\n| variant |")
	for _, role := range cpuRoles {
		fmt.Fprintf(b, " %s |", role)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(cpuRoles)) + "\n")
	raw := map[string]map[string]float64{}
	for _, v := range variants {
		a := res[v]
		fmt.Fprintf(b, "| %s |", v)
		raw[string(v)] = map[string]float64{}
		for _, role := range cpuRoles {
			perPod := float64(a.cpu[role]) / float64(time.Millisecond) / float64(a.pods)
			raw[string(v)][role] = perPod
			fmt.Fprintf(b, " %.2f ms |", perPod)
		}
		b.WriteString("\n")
	}
	r.record("admission_cpu_ms_per_pod", raw)
}
