package main

// OpenKruise's pod webhook as a peer in the admission item: one Kruise
// SidecarSet injects the same sidecar as Deckhand's one-SidecarSet variant.

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// kruiseSidecarSetHash is the annotation Kruise's webhook writes on every pod
// it injects: the probe tells Kruise's injection from anyone else's by it.
const kruiseSidecarSetHash = "kruise.io/sidecarset-hash"

// admissionNamespace creates a run's namespace: labelled for Kruise's
// webhook in the Kruise runs only.
func admissionNamespace(ctx context.Context, e *env, name string, v admVariant) error {
	if v == admKruise {
		return kruiseNamespace(ctx, e.cs, name)
	}
	return e.namespace(ctx, name)
}

// setKruiseVariant creates Kruise's SidecarSet for the Kruise runs and
// deletes it for the others, so that Kruise's SidecarSet controller does no
// work on the pods of Deckhand's runs (its selector would match them).
func setKruiseVariant(ctx context.Context, e *env, on bool) error {
	ss, err := kruiseSidecarSet(kruiseBenchSidecarSet, "bench", sidecarContainer(), intstr.FromInt32(1))
	if err != nil {
		return err
	}
	if on {
		if err := e.c.Create(ctx, ss); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	}
	if err := e.c.Delete(ctx, ss); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// kruiseRequests is the count of API requests kruise-manager has sent (0
// without Kruise).
func kruiseRequests(ctx context.Context, k *kruiseManager) float64 {
	if k == nil {
		return 0
	}
	m, err := k.metrics(ctx)
	if err != nil {
		logf("kruise metrics: %v", err)
		return 0
	}
	return m.sum("rest_client_requests_total")
}

// kruiseAdmission compares Deckhand's one-SidecarSet variant with Kruise's in
// the admission section (b) and the summary, and records every variant's raw
// results. skip says why Kruise did not run ("" when it did).
func kruiseAdmission(b *strings.Builder, r *report, res map[admVariant]*admResult, skip string) {
	recordAdmission(r, res)
	if skip != "" {
		r.info("1", "admission, Deckhand vs OpenKruise", "not measured: "+skip)
		return
	}
	one, kr, none, ni := res[admOne], res[admKruise], res[admNone], res[admNullInj]
	dTP, kTP := spreadOf(one.runs), spreadOf(kr.runs)
	tpRatio := ratioFigure(dTP, kTP)
	// What each run's one-client p50 adds to the pooled p50 without a webhook.
	noneSeq := msFloat(percentile(none.seq, 50))
	added := func(a *admResult) spread {
		xs := make([]float64, len(a.seqP50s))
		for i, x := range a.seqP50s {
			xs[i] = x - noneSeq
		}
		return spreadOf(xs)
	}
	dAdd, kAdd := added(one), added(kr)
	// A ratio over Kruise's added p50 needs it above zero; at or below
	// zero in a run, the ratio has no upper end (ratioFigure).
	addRatio := ratioFigure(dAdd, kAdd)
	addRatioText := "n/a (Kruise adds nothing measurable)"
	if kAdd.Median > 0 {
		addRatioText = times(addRatio.Median)
	}
	perSec := func(x float64) string { return fmt.Sprintf("%.0f", x) }
	msText := func(x float64) string { return fmt.Sprintf("%.1f ms", x) }
	fmt.Fprintf(b, "\n**OpenKruise as a peer** (docs/bench-kruise.md): kruise-manager v1.9.1 runs as a process for the whole item (admin identity, client limit QPS 1000/burst 2000, "+
		"SidecarSet and pod webhooks only, `WorkloadSpread` and `PodUnavailableBudgetDeleteGate` off), and its variant *%s* has one Kruise SidecarSet inject the same `log-agent` container "+
		"as Deckhand's *%s*. Each variant has exactly one injecting webhook: Kruise's pod webhook only sees namespaces labelled `%s=%s` (those of the Kruise runs), "+
		"and during the Kruise runs Deckhand's pod webhook configuration is removed and its SidecarSets deleted, as in the variants without Deckhand; Kruise's SidecarSet exists only during its runs. "+
		"Both managers run throughout, so both caches follow every pod of every run. What still differs: Kruise's webhook is its whole pod handler (the other pod features "+
		"it serves are turned off or find nothing to do here), its configuration says `failurePolicy: Fail` where Deckhand's says `Ignore`, and it serves with its own self-signed certificate.\n\n",
		admKruise, admOne, kruiseNamespaceLabel, kruiseVariant)
	b.WriteString("| figure (median over the runs, min–max) | Deckhand, 1 SidecarSet | OpenKruise, 1 SidecarSet | Deckhand / OpenKruise |\n|---|---|---|---|\n")
	fmt.Fprintf(b, "| creates/s, 16 clients | %s | %s | %s (range %s) |\n", dTP.format(perSec), kTP.format(perSec), times(tpRatio.Median), tpRatio.rangeText(times))
	dP50, kP50 := spreadOf(one.p50s), spreadOf(kr.p50s)
	fmt.Fprintf(b, "| p50, 16 clients | %s | %s | %.2fx |\n", dP50.format(msText), kP50.format(msText), dP50.Median/kP50.Median)
	dSeq, kSeq := spreadOf(one.seqP50s), spreadOf(kr.seqP50s)
	fmt.Fprintf(b, "| p50, one client | %s | %s | %.2fx |\n", dSeq.format(msText), kSeq.format(msText), dSeq.Median/kSeq.Median)
	fmt.Fprintf(b, "| added p50, one client (each run's p50 - the pooled p50 without a webhook, %.1f ms) | %s | %s | %s |\n", noneSeq, dAdd.format(msText), kAdd.format(msText), addRatioText)
	fmt.Fprintf(b, "| the injecting manager's API requests per pod | %.2f | %.2f | |\n", one.mgrReq/float64(one.pods), kr.mgrReq/float64(kr.pods))
	dOwn, kOwn := ratioFigure(dTP, spreadOf(ni.runs)), ratioFigure(kTP, spreadOf(ni.runs))
	fmt.Fprintf(b, "\nAgainst the minimal webhook injecting the same sidecar (*%s*), throughput (medians of the runs, ratio range): Deckhand %s (%s), OpenKruise %s (%s).\n",
		admNullInj, times(dOwn.Median), dOwn.rangeText(times), times(kOwn.Median), kOwn.rangeText(times))
	b.WriteString("\nWhat the ratio to OpenKruise depends on besides Deckhand: OpenKruise's own pod handler (kruise-manager's CPU per pod in the table above, and what its patch makes the API server do); " +
		"the machine, since at these rates the API server's CPU decides throughput and its share of a webhook call differs between machines; " +
		"the client limits (none on the 16 clients, kruise-manager at QPS 1000); and both managers' caches following every pod of every run. " +
		"Deckhand's ratio to the minimal webhook, at the top of this section, depends on Deckhand alone.\n")

	r.target("1", "admission throughput, Deckhand / OpenKruise (1 SidecarSet each, 16 clients; medians of the runs)", ">= 1.5x", atLeast(1.5), tpRatio, times,
		fmt.Sprintf("%s (Deckhand %s, Kruise %s creates/s)", times(tpRatio.Median), dTP.format(perSec), kTP.format(perSec)))
	r.target("1", "added p50 latency, one client, Deckhand / OpenKruise (medians of the runs)", "<= 0.5x", atMost(0.5), addRatio, times,
		fmt.Sprintf("%s (Deckhand %s, Kruise %s)", addRatioText, dAdd.format(msText), kAdd.format(msText)))
	r.info("1", "OpenKruise 1 SidecarSet / a minimal webhook injecting the same sidecar: throughput (medians of the runs)",
		fmt.Sprintf("%s (range %s)", times(kOwn.Median), kOwn.rangeText(times)))
	r.record("admission-vs-kruise", map[string]any{
		"throughput_ratio": tpRatio, "deckhand_creates_per_s": dTP, "kruise_creates_per_s": kTP,
		"one_client_added_p50_ratio": addRatio, "deckhand_one_client_added_p50_ms": dAdd, "kruise_one_client_added_p50_ms": kAdd,
		"none_one_client_p50_ms":      noneSeq,
		"deckhand_vs_minimal_webhook": dOwn, "kruise_vs_minimal_webhook": kOwn,
	})
}
