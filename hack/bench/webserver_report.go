package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/deckhand-dev/deckhand/internal/controller/webserver"
)

// reportWebServer writes item 5's section from the bursts (runs, of n
// WebServers each) and the two churn phases of length churn (baseChurn by the
// plain client, res through Deckhand, which cost churnCost), and judges its
// targets.
func reportWebServer(r *report, variants []string, runs []*burstRun, n int, churn time.Duration, baseChurn, res churnResult, churnCost cost) {
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
	burstCost := dhRuns[len(dhRuns)-1].Cost
	p99 := percentile(res.lat, 99)
	dh, plain := sum[burstDeckhand], sum[burstPlain]
	ratio := dh.Median / plain.Median
	var b strings.Builder
	fmt.Fprintf(&b, "Cluster B. Burst: %d WebServers (`replicas: 0`, so the figure is Deckhand's work and not the scheduler's) created by %d workers; "+
		"done when every Deployment and Service exists, every Deployment is observed at its generation and `Available` (kube-controller-manager's part) and every WebServer has `status.observedGeneration == metadata.generation` and `Available=True` (polled every 200 ms). "+
		"Baseline: a plain client (%d workers, as many as Deckhand's WebServer controller has) creating the same Deployments and Services itself, done when every Deployment is Available. The bursts alternate (%s), %d of each, each in a fresh namespace; the previous burst's namespace of the same variant is deleted (and gone) before the next burst starts. "+
		"Churn, on the last burst of each variant (plain client first): one change every 100 ms for %s, round robin (Deckhand: `spec.env` of the WebServer; plain client: the Deployment's template); latency from sending the patch until the bench's Deployment informer sees the new value in the template.\n\n",
		n, webserver.Workers, webserver.Workers, joinOrder(runOrder(variants, burstRounds)), burstRounds, churn)
	b.WriteString("| run | variant | created | all Available (and WebServer statuses current) | Deployment seen p50 / max | seen -> Available p50 / max | reconciles per WebServer | Deckhand requests per WebServer |\n|---|---|---|---|---|---|---|---|\n")
	for i, x := range runs {
		timeline := fmt.Sprintf("%s / %s | %s / %s", msOf(x.SeenMs, 50), msOf(x.SeenMs, 100), msOf(x.AvailableMs, 50), msOf(x.AvailableMs, 100))
		if x.Variant == burstDeckhand {
			fmt.Fprintf(&b, "| %d | %s | %.2f s | %.2f s | %s | %.2f | %.2f (%s) |\n", i+1, x.Variant, x.CreatedSecs, x.Seconds, timeline,
				x.Cost.reconciles["webserver"]/float64(n), x.Cost.mgrRequests/float64(n), byMethod(x.Cost.mgrByMethod, float64(n)))
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
}
