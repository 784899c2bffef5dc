package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	order := runOrder([]admVariant{admNone, admPre, admNull, admNullInj, admOne, admPolicy, admKruise, admHundred}, cfg.size(4, 1))
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
		if err := e.deletePods(ctx, ns, metav1.ListOptions{}); err != nil {
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
		if err := e.deletePods(ctx, seqNS, metav1.ListOptions{}); err != nil {
			return err
		}
	}
	if err := profileInjection(ctx, cfg, e, k, null, n, clients); err != nil {
		return err
	}
	variants := []admVariant{admNone, admPre, admNull, admNullInj, admOne, admPolicy, admHundred}
	if k != nil {
		variants = append(variants, admKruise)
	}
	reportAdmission(r, res, order, variants, n, clients, nSeq, skipKruise)
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
	return e.deletePods(ctx, ns, metav1.ListOptions{})
}
