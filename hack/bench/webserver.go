package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

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
	logf("[webserver] churn: %d changes, p99 %s", res.sent, ms(percentile(res.lat, 99)))

	r.record("webserver", map[string]any{
		"webServers": n, "churnSeconds": churn.Seconds(), "bursts": runs,
		"baselineChurn": baseChurn.fields(), "churn": res.fields(), "churnCost": churnCost,
	})
	reportWebServer(r, variants, runs, n, churn, baseChurn, res, churnCost)
	return nil
}
