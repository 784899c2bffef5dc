package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

type scaleKind string

const (
	kindRS     scaleKind = "ReplicaSet (kube-controller-manager)"
	kindPodSet scaleKind = "PodSet (Deckhand)"
	// kindPodSetRecreate is a PodSet that never updates in place
	// (inPlaceIfPossible: false): its pods carry no in-place update gate,
	// so each is one API write, as a ReplicaSet's.
	kindPodSetRecreate scaleKind = "PodSet, inPlaceIfPossible: false (Deckhand)"
	kindPlain          scaleKind = "plain client, 32 workers"
)

type scaleResult struct {
	kind     scaleKind
	n        int
	ns       string
	round    int
	up, down time.Duration
	upCost   cost
	downCost cost
	// upCPU and downCPU are the CPU time each process used from the scale
	// (or the plain client's first request) until the pods were Ready or gone.
	upCPU, downCPU cpuSnapshot
}

func scaleTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/team/app:v1",
				Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

// settleTime is how long settle waits for the last requests of a phase to
// show in the metrics; -quick shortens it (its figures are a smoke test).
var settleTime = 3 * time.Second

func settle() { time.Sleep(settleTime) }

// scaleNamespaces names the namespace of each kind's runs.
var scaleNamespaces = map[scaleKind]string{kindRS: "rs", kindPodSet: "podset", kindPodSetRecreate: "podset-recreate", kindPlain: "plain"}

// scaleRounds is how many times each workload kind is scaled up and down.
const scaleRounds = 3

// runScales runs runScale scaleRounds times for each of kinds, interleaved,
// each run in a namespace of its own (cluster-kind-round), keeps every run's
// raw figures in r under podset-cluster, and returns the results of each
// kind in the order of its rounds and their summary in the order of kinds.
func runScales(ctx context.Context, e *env, r *report, cluster string, n int, kinds ...scaleKind) (map[scaleKind][]*scaleResult, []scaleSummary, error) {
	out := map[scaleKind][]*scaleResult{}
	for i := range scaleRounds {
		for _, kind := range interleaved(kinds, i) {
			res, err := runScale(ctx, e, kind, fmt.Sprintf("%s-%s-%d", cluster, scaleNamespaces[kind], i), n)
			if err != nil {
				return nil, nil, err
			}
			res.round = i
			out[kind] = append(out[kind], res)
		}
	}
	recordScales(r, "podset-"+cluster, out)
	return out, summarize(out, kinds...), nil
}

// runScale scales one workload kind 0 -> n until every pod is Ready, then
// n -> 0 until every pod is gone, in the fresh namespace ns.
func runScale(ctx context.Context, e *env, kind scaleKind, ns string, n int) (*scaleResult, error) {
	if err := e.namespace(ctx, ns); err != nil {
		return nil, err
	}
	tr, err := trackPods(ctx, e.cs, ns)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	const app = "scale"
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	var obj client.Object
	switch kind {
	case kindRS:
		obj = &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "scale", Namespace: ns},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: scaleTemplate(app)}}
	case kindPodSet, kindPodSetRecreate:
		ps := &deckhandv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "scale", Namespace: ns},
			Spec: deckhandv1alpha1.PodSetSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: scaleTemplate(app)}}
		if kind == kindPodSetRecreate {
			ps.Spec.UpdateStrategy.InPlaceIfPossible = ptr.To(false)
		}
		obj = ps
	}
	if obj != nil {
		if err := e.c.Create(ctx, obj); err != nil {
			return nil, err
		}
	}
	settle()
	scale := func(replicas int) error {
		return e.c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)))
	}
	up, down := func() error { return scale(n) }, func() error { return scale(0) }
	if kind == kindPlain {
		name := func(i int) string { return fmt.Sprintf("plain-%05d", i) }
		up = func() error {
			return runWorkers(n, 32, func(i int) error {
				t := scaleTemplate(app)
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: ns, Labels: t.Labels}, Spec: t.Spec}
				_, err := e.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
				return err
			})
		}
		down = func() error {
			return runWorkers(n, 32, func(i int) error { return e.cs.CoreV1().Pods(ns).Delete(ctx, name(i), metav1.DeleteOptions{}) })
		}
	}
	res := &scaleResult{kind: kind, n: n, ns: ns}
	phases := []struct {
		what string
		act  func() error
		done func(total, ready int) bool
		took *time.Duration
		cpu  *cpuSnapshot
		cost *cost
	}{
		{fmt.Sprintf("%s 0->%d Ready", kind, n), up, func(_, ready int) bool { return ready >= n }, &res.up, &res.upCPU, &res.upCost},
		{fmt.Sprintf("%s %d->0 gone", kind, n), down, func(total, _ int) bool { return total == 0 }, &res.down, &res.downCPU, &res.downCost},
	}
	before, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	for _, ph := range phases {
		// The CPU time is taken over the timed part only; the cost also
		// counts the requests that follow it until the metrics settle.
		c0, err := readCPU()
		if err != nil {
			return nil, err
		}
		start := time.Now()
		if err := ph.act(); err != nil {
			return nil, err
		}
		if *ph.took, err = tr.waitFor(ctx, start, 15*time.Minute, ph.what, ph.done); err != nil {
			return nil, err
		}
		c1, err := readCPU()
		if err != nil {
			return nil, err
		}
		*ph.cpu = c1.sub(c0)
		settle()
		after, err := e.scrape(ctx)
		if err != nil {
			return nil, err
		}
		*ph.cost, before = diff(before, after), after
	}
	logf("[podset] %s (%s): 0->%d Ready %s, %d->0 gone %s", kind, ns, n, secs(res.up), n, secs(res.down))
	return res, nil
}

// scaleSummary is one kind's figures over its rounds.
type scaleSummary struct {
	kind scaleKind
	// up and down are seconds; upReq and downReq the kind's own API
	// requests per pod created or deleted (Deckhand's client for PodSet,
	// kube-controller-manager's net of the same round's PodSet run for
	// ReplicaSet, one by construction for the plain client); writes is every
	// write the API server served per pod created.
	up, down, upReq, downReq, writes spread
}

// summarize computes each kind's spreads; the ReplicaSet's requests are
// kube-controller-manager's net of the PodSet run of the same round.
func summarize(res map[scaleKind][]*scaleResult, kinds ...scaleKind) []scaleSummary {
	var out []scaleSummary
	for _, kind := range kinds {
		var up, down, upReq, downReq, writes []float64
		for i, x := range res[kind] {
			n := float64(x.n)
			up, down = append(up, x.up.Seconds()), append(down, x.down.Seconds())
			writes = append(writes, x.upCost.apiMutating/n)
			switch kind {
			case kindPodSet, kindPodSetRecreate:
				upReq, downReq = append(upReq, x.upCost.mgrRequests/n), append(downReq, x.downCost.mgrRequests/n)
			case kindRS:
				ps := res[kindPodSet][i]
				upReq, downReq = append(upReq, netKCM(x.upCost, ps.upCost)/n), append(downReq, netKCM(x.downCost, ps.downCost)/n)
			case kindPlain:
				upReq, downReq = append(upReq, 1), append(downReq, 1)
			}
		}
		out = append(out, scaleSummary{kind, spreadOf(up), spreadOf(down), spreadOf(upReq), spreadOf(downReq), spreadOf(writes)})
	}
	return out
}

func secsF(v float64) string { return fmt.Sprintf("%.2f s", v) }
func num2(v float64) string  { return fmt.Sprintf("%.2f", v) }

// recordScales keeps every run's raw figures under name.
func recordScales(r *report, name string, res map[scaleKind][]*scaleResult) {
	var runs []map[string]any
	for kind, xs := range res {
		for _, x := range xs {
			runs = append(runs, map[string]any{"kind": string(kind), "round": x.round, "namespace": x.ns, "pods": x.n,
				"upSeconds": x.up.Seconds(), "downSeconds": x.down.Seconds(), "upCost": x.upCost, "downCost": x.downCost,
				"upCPUSeconds": x.upCPU.seconds(), "downCPUSeconds": x.downCPU.seconds()})
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i]["namespace"].(string) < runs[j]["namespace"].(string) })
	r.record(name, runs)
}

// benchPodSetLimited: item 2a, its own cluster with kube-controller-manager
// at its default client limits and Deckhand limited alike.
func benchPodSetLimited(ctx context.Context, cfg *config, r *report) error {
	opts := localcluster.Full(1)
	opts.SchedulerClientQPS, opts.SchedulerClientBurst = 500, 1000
	e, err := startEnv(ctx, cfg, "limited", opts, []string{"--kube-api-qps=20", "--kube-api-burst=30"})
	if err != nil {
		return err
	}
	defer e.stop()
	n := cfg.size(1000, 100)
	kinds := []scaleKind{kindRS, kindPodSet, kindPodSetRecreate}
	res, sum, err := runScales(ctx, e, r, "a", n, kinds...)
	if err != nil {
		return err
	}
	rs, ps, recreate := sum[0], sum[1], sum[2]
	var b strings.Builder
	fmt.Fprintf(&b, "Cluster A: kube-controller-manager at its defaults (`--kube-api-qps 20 --kube-api-burst 30`, a bucket per controller), Deckhand `--kube-api-qps 20 --kube-api-burst 30` (one bucket for the process), "+
		"kube-scheduler raised to QPS 500/burst 1000 (not the bottleneck), one kwok fake node. Times are from the scale patch until the bench's pod informer sees all %d pods Ready (up) or none left (down). "+
		"A PodSet's pods carry its in-place update gate unless `inPlaceIfPossible` is false, and such a pod is Ready only once Deckhand has written the gate's condition: a second write a pod, within the same client limit. "+
		"%d rounds, interleaved (%s), each run in a fresh namespace.\n\n", n, scaleRounds, roundOrder(kinds))
	summaryTable(&b, sum, rs)
	costTable(&b, res, kinds...)
	r.section("2a. PodSet vs ReplicaSet, client limits at kube-controller-manager's defaults", b.String())
	up, down := ratioFigure(ps.up, rs.up), ratioFigure(ps.down, rs.down)
	r.target("2a", fmt.Sprintf("PodSet/ReplicaSet time 0 -> %d Ready (medians)", n), "<= 1.0", atMost(1), up, num2,
		fmt.Sprintf("%.2f (%s vs %s)", up.Median, ps.up.format(secsF), rs.up.format(secsF)))
	r.target("2a", fmt.Sprintf("PodSet/ReplicaSet time %d -> 0 gone (medians)", n), "<= 1.0", atMost(1), down, num2,
		fmt.Sprintf("%.2f (%s vs %s)", down.Median, ps.down.format(secsF), rs.down.format(secsF)))
	r.info("2a", fmt.Sprintf("PodSet with inPlaceIfPossible: false / ReplicaSet time 0 -> %d Ready (medians)", n),
		fmt.Sprintf("%.2f (%s vs %s)", recreate.up.Median/rs.up.Median, recreate.up.format(secsF), rs.up.format(secsF)))
	r.info("2a", "API requests per created pod: PodSet (Deckhand's client) vs ReplicaSet (kube-controller-manager's, net)",
		fmt.Sprintf("PodSet %s; PodSet with inPlaceIfPossible: false %s; ReplicaSet %s", ps.upReq.format(num2), recreate.upReq.format(num2), rs.upReq.format(num2)))
	return nil
}

// benchPodSetUnlimited: item 2b in cluster B (every client limit raised).
func benchPodSetUnlimited(ctx context.Context, cfg *config, e *env, r *report) error {
	n := cfg.size(1000, 200)
	kinds := []scaleKind{kindPlain, kindRS, kindPodSet}
	res, sum, err := runScales(ctx, e, r, "b", n, kinds...)
	if err != nil {
		return err
	}
	plain, rs, ps := sum[0], sum[1], sum[2]
	var b strings.Builder
	fmt.Fprintf(&b, "Cluster B: kube-controller-manager and kube-scheduler at QPS 1000/burst 2000, Deckhand without a client-side limit. "+
		"The plain client creates (then deletes) the same %d pods with 32 workers and no rate limit; its pods go through the scheduler like the others: the control plane's limit. "+
		"%d rounds, interleaved (%s), each run in a fresh namespace.\n\n", n, scaleRounds, roundOrder(kinds))
	summaryTable(&b, sum, plain)
	costTable(&b, res, kinds...)
	r.section("2b. PodSet vs ReplicaSet vs a plain client, client limits off", b.String())
	up := ratioFigure(ps.up, plain.up)
	r.target("2b", fmt.Sprintf("PodSet 0 -> %d Ready / plain client (medians)", n), "<= 1.5", atMost(1.5), up, num2,
		fmt.Sprintf("%.2f (%s vs %s)", up.Median, ps.up.format(secsF), plain.up.format(secsF)))
	r.info("2b", "PodSet/ReplicaSet time, up and down (medians)", fmt.Sprintf("up %.2f (ReplicaSet %s), down %.2f (PodSet %s, ReplicaSet %s)",
		ps.up.Median/rs.up.Median, rs.up.format(secsF), ps.down.Median/rs.down.Median, ps.down.format(secsF), rs.down.format(secsF)))
	r.info("2b", "PodSet/plain client time n -> 0 gone (medians)", fmt.Sprintf("%.2f (%s vs %s)", ps.down.Median/plain.down.Median, ps.down.format(secsF), plain.down.format(secsF)))
	machineUp := func(kind scaleKind) string {
		var xs []float64
		for _, x := range res[kind] {
			xs = append(xs, float64(x.upCPU[roleMachine])/float64(time.Millisecond)/float64(x.n))
		}
		return spreadOf(xs).format(func(v float64) string { return fmt.Sprintf("%.2f ms", v) })
	}
	r.info("2b", "whole-machine CPU per pod, 0 -> n (medians): plain client / ReplicaSet / PodSet",
		fmt.Sprintf("%s / %s / %s", machineUp(kindPlain), machineUp(kindRS), machineUp(kindPodSet)))
	r.info("6", "API requests per created pod, PodSet (Deckhand's client) vs ReplicaSet (kube-controller-manager's, net), cluster B",
		fmt.Sprintf("PodSet %s; ReplicaSet %s", ps.upReq.format(num2), rs.upReq.format(num2)))
	return nil
}

// roundOrder prints the order of the runs, e.g. "A B, B A, A B".
func roundOrder(kinds []scaleKind) string {
	var rounds []string
	for i := range scaleRounds {
		var names []string
		for _, k := range interleaved(kinds, i) {
			names = append(names, strings.SplitN(string(k), " ", 2)[0])
		}
		rounds = append(rounds, strings.Join(names, " → "))
	}
	return strings.Join(rounds, "; ")
}

// netKCM is kube-controller-manager's requests during the ReplicaSet run
// minus its requests during the PodSet run (the garbage collector,
// endpoint-slice and other controllers that react to any pod): what the
// ReplicaSet controller itself sent.
func netKCM(rs, ps cost) float64 { return rs.kcmRequests - ps.kcmRequests }

func summaryTable(b *strings.Builder, rows []scaleSummary, base scaleSummary) {
	b.WriteString("Each figure: median (min–max, n) over the rounds; ratios are of the medians. *Requests per pod*: the workload's own controller's API requests per pod created (up) or deleted (down): " +
		"Deckhand's `rest_client_requests_total` for PodSet; for ReplicaSet, kube-controller-manager's requests minus its requests during the same round's PodSet run (its other controllers react to any pod); one create or delete for the plain client. " +
		"*API writes per pod*: every write the API server served during the scale-up, all clients.\n\n")
	b.WriteString("| workload | 0 -> n Ready | ratio | n -> 0 gone | ratio | requests per pod, up | requests per pod, down | API writes per pod, up |\n|---|---|---|---|---|---|---|---|\n")
	for _, x := range rows {
		fmt.Fprintf(b, "| %s | %s | %.2fx | %s | %.2fx | %s | %s | %s |\n", x.kind, x.up.format(secsF), x.up.Median/base.up.Median,
			x.down.format(secsF), x.down.Median/base.down.Median, x.upReq.format(num2), x.downReq.format(num2), x.writes.format(num2))
	}
	b.WriteString("\n")
}

func costTable(b *strings.Builder, res map[scaleKind][]*scaleResult, kinds ...scaleKind) {
	b.WriteString("<details><summary>Every run: time and cost (item 6) per pod</summary>\n\n")
	b.WriteString("Per pod created (up) or deleted (down). *Deckhand client*: the manager's `rest_client_requests_total`; " +
		"*KCM*: `apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"kube-system-service-accounts\"}` (every kube-controller-manager controller); " +
		"*API writes*: every POST/PUT/PATCH/DELETE the API server served (`apiserver_request_total`, all clients: scheduler bindings and kwok status updates included); " +
		"*reconciles*: `controller_runtime_reconcile_total{controller=\"podset\"}`; " +
		"*CPU ms*: CPU time per pod of kube-apiserver, the Deckhand manager, kube-controller-manager and the whole machine (`/proc`) over the phase's timed part.\n\n")
	b.WriteString("| round | workload | phase | time | Deckhand client | Deckhand by method | KCM | API writes | API requests (no watches) | PodSet reconciles | CPU ms: API server | Deckhand | KCM | machine |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i := range scaleRounds {
		for _, kind := range interleaved(kinds, i) {
			x := res[kind][i]
			for _, ph := range []struct {
				name string
				t    time.Duration
				c    cost
				cpu  cpuSnapshot
			}{{"up", x.up, x.upCost, x.upCPU}, {"down", x.down, x.downCost, x.downCPU}} {
				n := float64(x.n)
				ms := func(role string) float64 { return float64(ph.cpu[role]) / float64(time.Millisecond) / n }
				fmt.Fprintf(b, "| %d | %s | %s | %s | %.2f | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", i+1, x.kind, ph.name, secs(ph.t), ph.c.mgrRequests/n, byMethod(ph.c.mgrByMethod, n),
					ph.c.kcmRequests/n, ph.c.apiMutating/n, ph.c.apiAll/n, ph.c.reconciles["podset"]/n,
					ms(roleAPIServer), ms(roleDeckhand), ms(roleKCM), ms(roleMachine))
			}
		}
	}
	b.WriteString("\n</details>\n")
}

func byMethod(m map[string]float64, n float64) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var s []string
	for _, k := range keys {
		s = append(s, fmt.Sprintf("%s %.2f", k, m[k]/n))
	}
	return strings.Join(s, ", ")
}
