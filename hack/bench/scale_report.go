package main

import (
	"fmt"
	"strings"
	"time"
)

// reportScale writes item 8's section from each pod count's figures (and
// OpenKruise's, peer, unless skip says why it was not measured), and judges
// its targets.
func reportScale(r *report, steps []*scaleStep, nodes int, peer *managerFigures, skip string) {
	var b strings.Builder
	fmt.Fprintf(&b, "etcd, kube-apiserver and kwok with %d fake nodes (no scheduler, no kube-controller-manager: pods are created bound to a node, round robin, and kwok makes them Running and Ready). "+
		"One SidecarSet matches every pod and injects its sidecar at creation; its rollout is paused. At each pod count, once no pod has changed for %s and the whole machine used less than %.1f CPU over that time (kwok writes the resources each container runs with after the pod is Ready; the time this took is the \"then quiet after\" column): a fresh manager, measured as in item 3 (caches synced, RSS, live heap after a forced collection); "+
		"then %d injected pods created one at a time in another namespace (latency of each create, the webhook included), each followed by the same pod in kube-system, where Deckhand's pod webhook is not called, once with a label for which item 1's minimal webhook adds the same sidecar (what calling any injecting webhook costs the API server at that pod count) and once without (no webhook: the control plane's own latency), and deleted; then the SidecarSet's image is changed and timed until its status names the new revision for every matched pod "+
		"(observedGeneration, latestRevision, matchedPods, updatedPods 0).\n\n", nodes, podsQuietFor, quietMachineCPU, scaleProbes)
	b.WriteString("| pods | create -> all Ready | then quiet after | caches synced | RSS | live heap | heap in use | one-client create p50 | p99 | p50, minimal webhook | p50, no webhook | added by a webhook (p50) | Deckhand's part (p50 over the minimal webhook) | manager CPU during the probes | SidecarSet reconciles then (mean time) | status after an image change |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "| %d | %.1f s | %.1f s | %.2f s | %.1f MiB | %.1f MiB | %.1f MiB | %s | %s | %s | %s | %s | %s | %.2f s | %.0f (%s) | %.2f s |\n", s.Pods, s.CreateSecs, s.QuietSecs, s.SyncSecs,
			mib(float64(s.RSSBytes)), mib(s.HeapAlloc), mib(s.HeapInuse), ms(percentile(s.Admission, 50)), ms(percentile(s.Admission, 99)),
			ms(percentile(s.Null, 50)), ms(percentile(s.Baseline, 50)), ms(s.added()), ms(s.ownAdded()), s.ProbeCPUSecs, s.ProbeReconciles, ms(s.reconcileMean()), s.ConvergeSecs)
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
			ms(percentile(last.Null, 50)-percentile(last.Baseline, 50)), ms(percentile(first.Null, 50)-percentile(first.Baseline, 50))))
	r.info("8", fmt.Sprintf("one-client create p50 with the webhook at %d pods / at %d pods (the control plane's latency included)", last.Pods, first.Pods),
		fmt.Sprintf("%.2f (%s vs %s)", percentile(last.Admission, 50).Seconds()/percentile(first.Admission, 50).Seconds(), ms(percentile(last.Admission, 50)), ms(percentile(first.Admission, 50))))
	r.info("8", fmt.Sprintf("manager at %d pods: RSS, live heap, start -> synced, status after an image change", last.Pods),
		fmt.Sprintf("%.1f MiB, %.1f MiB, %.2f s, %.2f s", mib(float64(last.RSSBytes)), mib(last.HeapAlloc), last.SyncSecs, last.ConvergeSecs))
	if peer != nil {
		r.info("8", fmt.Sprintf("RSS at %d pods, Deckhand / OpenKruise", last.Pods),
			fmt.Sprintf("%.2fx (%.1f MiB vs %.1f MiB)", float64(last.RSSBytes)/float64(peer.rss), mib(float64(last.RSSBytes)), mib(float64(peer.rss))))
	}
}
