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
	kindPlain  scaleKind = "plain client, 32 workers"
)

type scaleResult struct {
	kind     scaleKind
	n        int
	up, down time.Duration
	upCost   cost
	downCost cost
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

// scaleNamespaces names the namespace of each kind's run, after the cluster's
// name.
var scaleNamespaces = map[scaleKind]string{kindRS: "rs", kindPodSet: "podset", kindPlain: "plain"}

// runScales runs runScale for each of kinds in turn, in the namespace
// cluster-<kind's name>, and returns their results in the same order.
func runScales(ctx context.Context, e *env, cluster string, n int, kinds ...scaleKind) ([]*scaleResult, error) {
	var out []*scaleResult
	for _, kind := range kinds {
		res, err := runScale(ctx, e, kind, cluster+"-"+scaleNamespaces[kind], n)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// runScale scales one workload kind 0 -> n until every pod is Ready, then
// n -> 0 until every pod is gone, each in a fresh namespace.
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
	case kindPodSet:
		obj = &deckhandv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "scale", Namespace: ns},
			Spec: deckhandv1alpha1.PodSetSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: scaleTemplate(app)}}
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
	res := &scaleResult{kind: kind, n: n}
	s0 := e.snapshot(ctx)
	start := time.Now()
	if kind == kindPlain {
		err = runWorkers(n, 32, func(i int) error {
			t := scaleTemplate(app)
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("plain-%05d", i), Namespace: ns, Labels: t.Labels}, Spec: t.Spec}
			_, err := e.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
	} else {
		err = scale(n)
	}
	if err != nil {
		return nil, err
	}
	if res.up, err = tr.waitFor(ctx, start, 15*time.Minute, fmt.Sprintf("%s 0->%d Ready", kind, n), func(total, ready int) bool { return ready >= n }); err != nil {
		return nil, err
	}
	settle()
	s1 := e.snapshot(ctx)
	start = time.Now()
	if kind == kindPlain {
		err = runWorkers(n, 32, func(i int) error {
			return e.cs.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("plain-%05d", i), metav1.DeleteOptions{})
		})
	} else {
		err = scale(0)
	}
	if err != nil {
		return nil, err
	}
	if res.down, err = tr.waitFor(ctx, start, 15*time.Minute, fmt.Sprintf("%s %d->0 gone", kind, n), func(total, _ int) bool { return total == 0 }); err != nil {
		return nil, err
	}
	settle()
	s2 := e.snapshot(ctx)
	res.upCost, res.downCost = diff(s0, s1), diff(s1, s2)
	logf("[podset] %s: 0->%d Ready %s, %d->0 gone %s", kind, n, secs(res.up), n, secs(res.down))
	return res, nil
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
	res, err := runScales(ctx, e, "a", n, kindRS, kindPodSet)
	if err != nil {
		return err
	}
	rs, ps := res[0], res[1]
	var b strings.Builder
	fmt.Fprintf(&b, "Cluster A: kube-controller-manager at its defaults (`--kube-api-qps 20 --kube-api-burst 30`), Deckhand `--kube-api-qps 20 --kube-api-burst 30`, "+
		"kube-scheduler raised to QPS 500/burst 1000 (not the bottleneck), one kwok fake node. Times are from the scale patch until the bench's pod informer sees all %d pods Ready (up) or none left (down).\n\n", n)
	scaleTable(&b, []*scaleResult{rs, ps}, rs)
	costTable(&b, []*scaleResult{rs, ps})
	r.section("2a. PodSet vs ReplicaSet, client limits at kube-controller-manager's defaults", b.String())
	up, down := ps.up.Seconds()/rs.up.Seconds(), ps.down.Seconds()/rs.down.Seconds()
	r.target("2a", fmt.Sprintf("PodSet/ReplicaSet time 0 -> %d Ready", n), "<= 1.0", fmt.Sprintf("%.2f (%s vs %s)", up, secs(ps.up), secs(rs.up)), up <= 1.0)
	r.target("2a", fmt.Sprintf("PodSet/ReplicaSet time %d -> 0 gone", n), "<= 1.0", fmt.Sprintf("%.2f (%s vs %s)", down, secs(ps.down), secs(rs.down)), down <= 1.0)
	return nil
}

// benchPodSetUnlimited: item 2b in cluster B (every client limit raised).
func benchPodSetUnlimited(ctx context.Context, cfg *config, e *env, r *report) error {
	n := cfg.size(1000, 200)
	res, err := runScales(ctx, e, "b", n, kindPlain, kindRS, kindPodSet)
	if err != nil {
		return err
	}
	plain, rs, ps := res[0], res[1], res[2]
	var b strings.Builder
	fmt.Fprintf(&b, "Cluster B: kube-controller-manager and kube-scheduler at QPS 1000/burst 2000, Deckhand without a client-side limit. "+
		"The plain client creates (then deletes) the same %d pods with 32 workers and no rate limit; its pods go through the scheduler like the others: the control plane's limit.\n\n", n)
	scaleTable(&b, []*scaleResult{plain, rs, ps}, plain)
	costTable(&b, []*scaleResult{plain, rs, ps})
	r.section("2b. PodSet vs ReplicaSet vs a plain client, client limits off", b.String())
	up := ps.up.Seconds() / plain.up.Seconds()
	r.target("2b", fmt.Sprintf("PodSet 0 -> %d Ready / plain client", n), "<= 1.5", fmt.Sprintf("%.2f (%s vs %s)", up, secs(ps.up), secs(plain.up)), up <= 1.5)
	r.note(fmt.Sprintf("2b without a target: PodSet/ReplicaSet up %.2f, down %.2f; PodSet/plain down %.2f.",
		ps.up.Seconds()/rs.up.Seconds(), ps.down.Seconds()/rs.down.Seconds(), ps.down.Seconds()/plain.down.Seconds()))
	r.info("6", "API requests per created pod, PodSet (Deckhand's client) vs ReplicaSet (kube-controller-manager's, net)",
		fmt.Sprintf("PodSet %.2f; ReplicaSet %.2f", ps.upCost.mgrRequests/float64(n), netKCM(rs.upCost, ps.upCost)/float64(n)))
	return nil
}

// netKCM is kube-controller-manager's requests during the ReplicaSet run
// minus its requests during the PodSet run (the garbage collector,
// endpoint-slice and other controllers that react to any pod): what the
// ReplicaSet controller itself sent.
func netKCM(rs, ps cost) float64 { return rs.kcmRequests - ps.kcmRequests }

func scaleTable(b *strings.Builder, rows []*scaleResult, base *scaleResult) {
	fmt.Fprintf(b, "| workload | 0 -> %d Ready | ratio | %d -> 0 gone | ratio |\n|---|---|---|---|---|\n", base.n, base.n)
	for _, x := range rows {
		fmt.Fprintf(b, "| %s | %s | %.2fx | %s | %.2fx |\n", x.kind, secs(x.up), x.up.Seconds()/base.up.Seconds(), secs(x.down), x.down.Seconds()/base.down.Seconds())
	}
	b.WriteString("\n")
}

func costTable(b *strings.Builder, rows []*scaleResult) {
	b.WriteString("Cost (item 6), per pod created (up) or deleted (down). *Deckhand client*: the manager's `rest_client_requests_total`; " +
		"*KCM*: `apiserver_flowcontrol_dispatched_requests_total{flow_schema=\"kube-system-service-accounts\"}` (every kube-controller-manager controller); " +
		"*API writes*: every POST/PUT/PATCH/DELETE the API server served (`apiserver_request_total`, all clients: scheduler bindings and kwok status updates included); " +
		"*reconciles*: `controller_runtime_reconcile_total{controller=\"podset\"}`.\n\n")
	b.WriteString("| workload | phase | Deckhand client | Deckhand by method | KCM | API writes | API requests (no watches) | PodSet reconciles |\n|---|---|---|---|---|---|---|---|\n")
	for _, x := range rows {
		for _, ph := range []struct {
			name string
			c    cost
		}{{"up", x.upCost}, {"down", x.downCost}} {
			n := float64(x.n)
			fmt.Fprintf(b, "| %s | %s | %.2f | %s | %.2f | %.2f | %.2f | %.2f |\n", x.kind, ph.name, ph.c.mgrRequests/n, byMethod(ph.c.mgrByMethod, n),
				ph.c.kcmRequests/n, ph.c.apiMutating/n, ph.c.apiAll/n, ph.c.reconciles["podset"]/n)
		}
	}
	b.WriteString("\n")
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
