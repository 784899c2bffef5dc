package main

// Item 8's probes: one-client pod creates with Deckhand's webhook, with the
// minimal webhook and with none, and what the manager did meanwhile.

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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
		if err := e.deletePods(ctx, ns, sel); err != nil {
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
