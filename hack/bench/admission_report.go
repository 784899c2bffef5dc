package main

import (
	"fmt"
	"strings"
	"time"
)

// reportAdmission writes item 1's section from every variant's results
// (order is the order of the runs, variants those measured), and judges its
// targets.
func reportAdmission(r *report, res map[admVariant]*admResult, order, variants []admVariant, n, clients, nSeq int, skipKruise string) {
	var b strings.Builder
	fmt.Fprintf(&b, "Cluster: etcd `--unsafe-no-fsync` + kube-apiserver only; the Deckhand manager as a process (all controllers and webhooks). "+
		"%d pods per run, %d concurrent clients, no client-side rate limit, pods pre-bound to a fake Node (`spec.nodeName`). "+
		"Run order %s (the variants are interleaved so that drift in machine load hits them alike); throughput is the median of a variant's runs, latency percentiles pool them. "+
		"After each run every measured pod is listed and checked for its variant's injection (the sidecar once, and Deckhand's injection record or Kruise's hash annotation where they inject; none of them where nothing injects): "+
		"a pod webhook that fails open admits pods unchanged, and any pod not injected as its variant injects fails the item.\n\n",
		n, clients, joinOrder(order))
	b.WriteString("| variant | pods | creates/s (per run) | creates/s (median) | p50 | p99 | throughput vs none (medians) | manager requests per pod (Deckhand's; Kruise's in its row) | API writes per pod | pods checked / not injected as the variant injects |\n|---|---|---|---|---|---|---|---|---|---|\n")
	base := res[admNone]
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

// admissionRaw is one variant's raw results.
type admissionRaw struct {
	Pods         int       `json:"pods"`
	CreatesPerS  []float64 `json:"creates_per_s"`
	P50ms        []float64 `json:"p50_ms"`
	OneClientP50 []float64 `json:"one_client_p50_ms"`
	// InjectionChecked is the measured pods listed after their runs and
	// checked for the variant's injection; InjectionMismatched those that
	// were not injected as the variant injects (any fails the item).
	InjectionChecked    int `json:"injection_checked"`
	InjectionMismatched int `json:"injection_mismatched"`
}

// recordAdmission keeps every variant's raw results so far: recorded after
// each run, so that an item failed by a mismatch leaves its counts behind.
func recordAdmission(r *report, res map[admVariant]*admResult) {
	raw := map[string]admissionRaw{}
	for v, a := range res {
		raw[string(v)] = admissionRaw{Pods: a.pods, CreatesPerS: a.runs, P50ms: a.p50s, OneClientP50: a.seqP50s,
			InjectionChecked: a.checked, InjectionMismatched: a.mismatched}
	}
	r.record("admission", raw)
}
