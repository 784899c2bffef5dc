package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
)

// restartVariant is who restarts the Deployments of one run of item 4.
type restartVariant string

const (
	restartDeckhand restartVariant = "Deckhand"
	restartPlain    restartVariant = "plain client"
)

// restartRounds: the variants run A B B A ..., restartRounds times each.
const restartRounds = 2

// restartSkewTarget is the skew p99 allowed over the plain client's, which
// sends nothing but the patches.
const restartSkewTarget = 1.25

// restartTracker records, through a Deployment informer on one namespace,
// when each Deployment's restartedAt template annotation first changed, how
// often it changed and its last value.
type restartTracker struct {
	mu      sync.Mutex
	first   map[string]time.Time
	changes map[string]int
	value   map[string]string
	*deploymentWatch
}

func trackRestarts(ctx context.Context, e *env, ns string) (*restartTracker, error) {
	t := &restartTracker{first: map[string]time.Time{}, changes: map[string]int{}, value: map[string]string{}}
	var err error
	t.deploymentWatch, err = watchDeployments(ctx, e, ns, toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(o, nw any) {
		now := time.Now()
		od, ok1 := o.(*appsv1.Deployment)
		nd, ok2 := nw.(*appsv1.Deployment)
		if !ok1 || !ok2 {
			return
		}
		ov, nv := od.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation], nd.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]
		if ov == nv {
			return
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if _, ok := t.first[nd.Name]; !ok {
			t.first[nd.Name] = now
		}
		t.changes[nd.Name]++
		t.value[nd.Name] = nv
	}})
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (t *restartTracker) seen() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.first)
}

// restartRun is one variant's run in a namespace of its own.
type restartRun struct {
	Variant   restartVariant `json:"variant"`
	Round     int            `json:"round"`
	Namespace string         `json:"namespace"`
	N         int            `json:"deployments"`
	// Trigger is the scheduled slot (Deckhand) or when the plain client's
	// workers started.
	Trigger time.Time `json:"trigger"`
	// Skews are each Deployment's first seen change minus Trigger.
	Skews latencies `json:"skewMs"`
	// AckMs is, for the plain client, when each of its patches returned,
	// minus Trigger: the restart as its sender knows it, before any watcher
	// has seen it.
	AckMs     []float64 `json:"ackMs,omitempty"`
	Twice     int       `json:"changedMoreThanOnce"`
	Wrong     int       `json:"wrongValue"`
	GenOff    int       `json:"generationNot2"`
	RolledOut float64   `json:"triggerToAllRolledOutSeconds"`
	// The manager's skew histogram (Deckhand's runs).
	HistCount float64 `json:"histogramCount,omitempty"`
	HistSum   float64 `json:"histogramSumSeconds,omitempty"`
	Cost      cost    `json:"cost"`
}

// benchRestart: item 4. Each run has n fresh Deployments (even ones 0
// replicas, odd ones 1) in a namespace of its own, all rolled out before
// anything restarts them, restarted at one instant either by n
// RestartSchedules firing in the same slot (Deckhand) or by a plain client
// patching the same annotation with as many workers as the controller has;
// the run ends once every rollout has finished and the namespace is gone, so
// the next one starts on a quiet control plane. The variants alternate
// A B B A.
func benchRestart(ctx context.Context, cfg *config, e *env, r *report) error {
	n := cfg.size(1000, 100)
	variants := []restartVariant{restartDeckhand, restartPlain}
	var runs []*restartRun
	for i := range restartRounds {
		for _, v := range interleaved(variants, i) {
			run, err := runRestart(ctx, cfg, e, v, i, n)
			if err != nil {
				return fmt.Errorf("%s, round %d: %w", v, i+1, err)
			}
			runs = append(runs, run)
		}
	}
	r.record("restart", runs)
	reportRestart(r, runs, variants, n)
	return nil
}

func runRestart(ctx context.Context, cfg *config, e *env, v restartVariant, round, n int) (*restartRun, error) {
	run := &restartRun{Variant: v, Round: round, N: n, Namespace: fmt.Sprintf("restart-%s-%d", map[restartVariant]string{restartDeckhand: "deckhand", restartPlain: "plain"}[v], round)}
	ns := run.Namespace
	if err := e.namespace(ctx, ns); err != nil {
		return nil, err
	}
	tr, err := trackRestarts(ctx, e, ns)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	name := func(i int) string { return fmt.Sprintf("d-%04d", i) }
	t0 := time.Now()
	if err := runWorkers(n, 32, func(i int) error {
		t := scaleTemplate(name(i))
		return e.c.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: ns},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(i % 2)), Selector: &metav1.LabelSelector{MatchLabels: t.Labels}, Template: t}})
	}); err != nil {
		return nil, err
	}
	if err := waitDeployments(ctx, e, ns, n, 1, 10*time.Minute); err != nil {
		return nil, fmt.Errorf("first rollout: %w", err)
	}
	logf("[restart] %s: %d Deployments created and rolled out in %s", ns, n, time.Since(t0).Round(time.Millisecond))
	settle()

	var before snapshot
	wantValue := ""
	switch v {
	case restartDeckhand:
		// The slot: the next whole minute at least lead away, so every
		// RestartSchedule exists (created before its first slot) in time.
		lead := time.Duration(cfg.size(25, 8)) * time.Second
		run.Trigger = time.Now().Add(lead).Truncate(time.Minute).Add(time.Minute).UTC()
		schedule := fmt.Sprintf("%d %d * * *", run.Trigger.Minute(), run.Trigger.Hour())
		if err := runWorkers(n, 32, func(i int) error {
			return e.c.Create(ctx, &deckhandv1alpha1.RestartSchedule{ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: ns},
				Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: schedule, TimeZone: "UTC",
					Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: name(i)}}}})
		}); err != nil {
			return nil, err
		}
		if time.Now().After(run.Trigger) {
			return nil, fmt.Errorf("creating the RestartSchedules ran past the slot %s", run.Trigger.Format(time.RFC3339))
		}
		logf("[restart] %s: %d RestartSchedules %q; slot in %s", ns, n, schedule, time.Until(run.Trigger).Round(time.Second))
		wantValue = run.Trigger.Format(time.RFC3339)
		if before, err = e.scrape(ctx); err != nil {
			return nil, err
		}
	case restartPlain:
		if before, err = e.scrape(ctx); err != nil {
			return nil, err
		}
		run.Trigger = time.Now()
		wantValue = run.Trigger.UTC().Format(time.RFC3339)
		patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, deckhandv1alpha1.RestartedAtAnnotation, wantValue)
		var ackMu sync.Mutex
		if err := runWorkers(n, restartschedule.Workers, func(i int) error {
			err := e.c.Patch(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name(i), Namespace: ns}}, client.RawPatch(types.MergePatchType, patch))
			ackMu.Lock()
			run.AckMs = append(run.AckMs, float64(time.Since(run.Trigger))/float64(time.Millisecond))
			ackMu.Unlock()
			return err
		}); err != nil {
			return nil, err
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Until(run.Trigger)+2*time.Minute, false, func(context.Context) (bool, error) {
		return tr.seen() >= n, nil
	})
	if err != nil {
		return nil, fmt.Errorf("only %d of %d Deployments restarted: %w", tr.seen(), n, err)
	}
	if err := waitDeployments(ctx, e, ns, n, 2, 10*time.Minute); err != nil {
		return nil, fmt.Errorf("rollout after the restart: %w", err)
	}
	run.RolledOut = time.Since(run.Trigger).Seconds()
	settle() // the controller's status writes that follow the rollouts
	after, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	run.Cost = diff(before, after)
	const hist = "deckhand_restartschedule_restart_skew_seconds"
	run.HistCount = after.mgr.sum(hist+"_count") - before.mgr.sum(hist+"_count")
	run.HistSum = after.mgr.sum(hist+"_sum") - before.mgr.sum(hist+"_sum")

	tr.mu.Lock()
	for d, at := range tr.first {
		run.Skews = append(run.Skews, at.Sub(run.Trigger))
		if tr.changes[d] != 1 {
			run.Twice++
		}
		if tr.value[d] != wantValue {
			run.Wrong++
		}
	}
	tr.mu.Unlock()
	// Every Deployment's generation moved exactly once (one template change).
	var list appsv1.DeploymentList
	if err := e.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, d := range list.Items {
		if d.Generation != 2 {
			run.GenOff++
		}
	}
	logf("[restart] %s: skew p50 %s, p99 %s; all rolled out %.1f s after the trigger", ns, ms(percentile(run.Skews, 50)), ms(percentile(run.Skews, 99)), run.RolledOut)
	return run, e.deleteNamespace(ctx, ns, 10*time.Minute)
}

func reportRestart(r *report, runs []*restartRun, variants []restartVariant, n int) {
	type summary struct{ p50, p99, rolled spread }
	sum := map[restartVariant]summary{}
	for _, v := range variants {
		var p50, p99, rolled []float64
		for _, x := range runs {
			if x.Variant == v {
				p50 = append(p50, percentile(x.Skews, 50).Seconds())
				p99 = append(p99, percentile(x.Skews, 99).Seconds())
				rolled = append(rolled, x.RolledOut)
			}
		}
		sum[v] = summary{spreadOf(p50), spreadOf(p99), spreadOf(rolled)}
	}
	dh, plain := sum[restartDeckhand], sum[restartPlain]

	var b strings.Builder
	fmt.Fprintf(&b, "Cluster B. Each run: %d fresh Deployments (half with 0 replicas, half with 1) in a namespace of their own, rolled out before anything restarts them; then either "+
		"(*Deckhand*) each is the target of its own RestartSchedule, all with the same cron minute, so every schedule fires in the same slot, or "+
		"(*plain client*) a plain client without rate limit patches the same `%s` template annotation on all of them at once with %d workers, the RestartSchedule controller's worker count (`restartschedule.Workers`). "+
		"Skew = the time the bench's Deployment informer saw the annotation change, minus the slot (Deckhand; by design the controller wakes 100 ms after it) or the plain client's start. "+
		"A run ends once every rollout has finished and its namespace is deleted and gone, so the next one starts on a quiet control plane. The variants alternate (%s), %d runs each.\n\n",
		n, deckhandv1alpha1.RestartedAtAnnotation, restartschedule.Workers, joinOrder(runOrder(variants, restartRounds)), restartRounds)
	b.WriteString("| variant | skew p50 | skew p99 | trigger -> all rolled out |\n|---|---|---|---|\n")
	for _, v := range variants {
		x := sum[v]
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", v, x.p50.format(secsF), x.p99.format(secsF), x.rolled.format(secsF))
	}
	b.WriteString("\nEvery run (medians above are over these):\n\n")
	b.WriteString("| run | variant | restarted | p50 | p90 | p99 | max | changed more than once | wrong value | generation != 2 | API writes per restart | Deckhand requests per restart | reconciles per restart |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, x := range runs {
		fn := float64(x.N)
		fmt.Fprintf(&b, "| %d | %s | %d/%d | %s | %s | %s | %s | %d | %d | %d | %.2f | %.2f | %.2f |\n", i+1, x.Variant, len(x.Skews), x.N,
			ms(percentile(x.Skews, 50)), ms(percentile(x.Skews, 90)), ms(percentile(x.Skews, 99)), ms(percentile(x.Skews, 100)),
			x.Twice, x.Wrong, x.GenOff, x.Cost.apiMutating/fn, x.Cost.mgrRequests/fn, x.Cost.reconciles["restartschedule"]/fn)
	}
	b.WriteString("\nWhen the API server acknowledged the restarts, before any watcher saw them: the manager's own histogram `deckhand_restartschedule_restart_skew_seconds` " +
		"(from the slot until each patch returned; a restart patched twice is observed twice), and the plain client's patches (from its start until each returned):")
	for i, x := range runs {
		switch {
		case x.Variant == restartDeckhand && x.HistCount > 0:
			fmt.Fprintf(&b, " run %d (Deckhand), %.0f observations, mean %s;", i+1, x.HistCount, ms(time.Duration(x.HistSum/x.HistCount*float64(time.Second))))
		case x.Variant == restartPlain && len(x.AckMs) > 0:
			fmt.Fprintf(&b, " run %d (plain client), mean %s, p99 %s, last %s;", i+1, msOfMean(x.AckMs), msOf(x.AckMs, 99), msOf(x.AckMs, 100))
		}
	}
	b.WriteString("\n")
	r.section("4. RestartSchedule skew", b.String())

	// The 2 s figure first asked for is below what this control plane
	// allows any client (the plain client's p99, several seconds at full
	// size); the target is therefore relative to that floor, measured in the
	// same run (docs/benchmark-analysis.md).
	ratio := ratioFigure(dh.p99, plain.p99)
	r.target("4", fmt.Sprintf("restart skew p99, %d schedules firing at once, Deckhand / plain client (this control plane's floor; medians of runs)", n),
		fmt.Sprintf("<= %.2fx", restartSkewTarget), atMost(restartSkewTarget), ratio, times,
		fmt.Sprintf("%s (Deckhand %s, plain client %s)", times(ratio.Median), dh.p99.format(secsF), plain.p99.format(secsF)))
	r.info("4", "restart skew p99, absolute (first asked: <= 2 s; below the floor when the plain client's p99 is above it)",
		fmt.Sprintf("%s (plain client %s)", dh.p99.format(secsF), plain.p99.format(secsF)))
	r.info("4", "restart skew p50, Deckhand vs plain client (medians)", fmt.Sprintf("%s vs %s", dh.p50.format(secsF), plain.p50.format(secsF)))
	restarted, twice, wrong, genOff, total := 0, 0, 0, 0, 0
	for _, x := range runs {
		if x.Variant == restartDeckhand {
			restarted, twice, wrong, genOff, total = restarted+len(x.Skews), twice+x.Twice, wrong+x.Wrong, genOff+x.GenOff, total+x.N
		}
	}
	// Judged on the Deployments restarted other than exactly once (none
	// may be): a count over every run, measured once.
	off := max(total-restarted, restarted-total) + twice + wrong + genOff
	r.target("4", "every Deployment restarted exactly once by its RestartSchedule (all Deckhand runs)", fmt.Sprintf("%d/%d", total, total), atMost(0), single(float64(off)),
		func(x float64) string { return fmt.Sprintf("%.0f off", x) },
		fmt.Sprintf("%d/%d restarted, %d more than once, %d wrong value, %d generation != 2", restarted, total, twice, wrong, genOff))
}
