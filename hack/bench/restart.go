package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// benchRestart: item 4. n Deployments (even ones 0 replicas, odd ones 1),
// one RestartSchedule each, all with the same cron minute, so they fire at
// the same instant. The bench's Deployment informer records when each
// template annotation changes (a watch event: an upper bound of the patch
// time by the watch delivery delay).
func benchRestart(ctx context.Context, cfg *config, e *env, r *report) error {
	n := cfg.size(1000, 100)
	const ns = "restart"
	if err := e.namespace(ctx, ns); err != nil {
		return err
	}
	type rec struct {
		first   time.Time
		changes int
		value   string
	}
	var mu sync.Mutex
	seen := map[string]*rec{}
	const baselineValue = "bench-baseline"
	baseSeen := map[string]time.Time{}
	factory := informers.NewSharedInformerFactoryWithOptions(e.cs, 0, informers.WithNamespace(ns))
	inf := factory.Apps().V1().Deployments().Informer()
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(o, nw any) {
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
		mu.Lock()
		defer mu.Unlock()
		if nv == baselineValue {
			if _, ok := baseSeen[nd.Name]; !ok {
				baseSeen[nd.Name] = now
			}
			return
		}
		x := seen[nd.Name]
		if x == nil {
			x = &rec{first: now}
			seen[nd.Name] = x
		}
		x.changes++
		x.value = nv
	}})
	if err != nil {
		return err
	}
	stop := make(chan struct{})
	defer func() { close(stop); factory.Shutdown() }()
	factory.Start(stop)

	t0 := time.Now()
	if err := runWorkers(n, 32, func(i int) error {
		t := scaleTemplate(fmt.Sprintf("d-%04d", i))
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("d-%04d", i), Namespace: ns},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To(int32(i % 2)), Selector: &metav1.LabelSelector{MatchLabels: t.Labels}, Template: t}}
		return e.c.Create(ctx, d)
	}); err != nil {
		return err
	}
	logf("[restart] %d Deployments created in %s", n, time.Since(t0).Round(time.Millisecond))
	// The slot: the next whole minute at least lead seconds away, so every
	// RestartSchedule exists (created after handledThrough) before it.
	lead := time.Duration(cfg.size(25, 8)) * time.Second
	slot := time.Now().Add(lead).Truncate(time.Minute).Add(time.Minute).UTC()
	schedule := fmt.Sprintf("%d %d * * *", slot.Minute(), slot.Hour())
	t0 = time.Now()
	if err := runWorkers(n, 32, func(i int) error {
		rs := &deckhandv1alpha1.RestartSchedule{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("d-%04d", i), Namespace: ns},
			Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: schedule, TimeZone: "UTC",
				Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: fmt.Sprintf("d-%04d", i)}}}}
		return e.c.Create(ctx, rs)
	}); err != nil {
		return err
	}
	created := time.Now()
	logf("[restart] %d RestartSchedules %q created in %s; slot %s (in %s)", n, schedule, created.Sub(t0).Round(time.Millisecond),
		slot.Format(time.RFC3339), time.Until(slot).Round(time.Second))
	if created.After(slot) {
		return fmt.Errorf("creating the RestartSchedules ran past the slot %s", slot)
	}
	before := e.snapshot(ctx)
	slotStr := slot.Format(time.RFC3339)
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Until(slot)+2*time.Minute, false, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= n, nil
	})
	if err != nil {
		mu.Lock()
		got := len(seen)
		mu.Unlock()
		return fmt.Errorf("only %d of %d Deployments patched: %w", got, n, err)
	}
	// Give a second patch (which must not happen) time to show.
	time.Sleep(5 * time.Second)
	after := e.snapshot(ctx)

	var skews []time.Duration
	twice, wrong := 0, 0
	mu.Lock()
	for _, x := range seen {
		skews = append(skews, x.first.Sub(slot))
		if x.changes != 1 {
			twice++
		}
		if x.value != slotStr {
			wrong++
		}
	}
	mu.Unlock()
	// Every Deployment's generation moved exactly once (one template change).
	var list appsv1.DeploymentList
	if err := e.c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	genOff := 0
	for _, d := range list.Items {
		if d.Generation != 2 {
			genOff++
		}
	}
	// Baseline: a plain client patching the same annotation on all n
	// Deployments at once with 16 workers (the controller's worker count):
	// how fast this control plane absorbs n restarts at the same instant.
	bstart := time.Now()
	if err := runWorkers(n, 16, func(i int) error {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("d-%04d", i), Namespace: ns}}
		return e.c.Patch(ctx, d, client.RawPatch(types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, deckhandv1alpha1.RestartedAtAnnotation, baselineValue)))
	}); err != nil {
		return err
	}
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(baseSeen) >= n, nil
	})
	var baseSkews []time.Duration
	mu.Lock()
	for _, t := range baseSeen {
		baseSkews = append(baseSkews, t.Sub(bstart))
	}
	mu.Unlock()

	c := diff(before, after)
	mSkew := after.mgr.sum("deckhand_restartschedule_restart_skew_seconds_sum") - before.mgr.sum("deckhand_restartschedule_restart_skew_seconds_sum")
	mCount := after.mgr.sum("deckhand_restartschedule_restart_skew_seconds_count") - before.mgr.sum("deckhand_restartschedule_restart_skew_seconds_count")

	var b strings.Builder
	fmt.Fprintf(&b, "Cluster B. %d Deployments (half with 0 replicas, half with 1), each the target of its own RestartSchedule `%s` (UTC): every schedule fires at %s. "+
		"Skew = the time the bench's Deployment informer saw the `%s` template annotation change, minus the scheduled time. "+
		"By design the controller wakes 100 ms after a slot.\n\n", n, schedule, slotStr, deckhandv1alpha1.RestartedAtAnnotation)
	b.WriteString("| Deployments patched | p50 | p90 | p99 | max | changed more than once | wrong value | generation != 2 |\n|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d/%d | %s | %s | %s | %s | %d | %d | %d |\n\n", len(skews), n, ms(percentile(skews, 50)), ms(percentile(skews, 90)),
		ms(percentile(skews, 99)), ms(percentile(skews, 100)), twice, wrong, genOff)
	fmt.Fprintf(&b, "Baseline, same run: a plain client (16 workers, no rate limit) patching the same annotation on all %d Deployments at once, "+
		"time from its start until the informer saw each change: %d seen, p50 %s, p90 %s, p99 %s, max %s. Deckhand's p99 is %.2fx the baseline's.\n\n",
		n, len(baseSkews), ms(percentile(baseSkews, 50)), ms(percentile(baseSkews, 90)), ms(percentile(baseSkews, 99)), ms(percentile(baseSkews, 100)),
		percentile(skews, 99).Seconds()/percentile(baseSkews, 99).Seconds())
	if mCount > 0 {
		fmt.Fprintf(&b, "The manager's own histogram `deckhand_restartschedule_restart_skew_seconds`: %.0f observations, mean %s.\n\n", mCount, ms(time.Duration(mSkew/mCount*float64(time.Second))))
	}
	fmt.Fprintf(&b, "Cost around the slot (item 6): %.0f reconciles of `restartschedule` (%.2f per RestartSchedule), %.0f Deckhand API requests (%s), %.2f per RestartSchedule.\n",
		c.reconciles["restartschedule"], c.reconciles["restartschedule"]/float64(n), c.mgrRequests, byMethod(c.mgrByMethod, 1), c.mgrRequests/float64(n))
	r.section("4. RestartSchedule skew", b.String())
	p99 := percentile(skews, 99)
	r.target("4", fmt.Sprintf("restart skew p99, %d schedules firing at once", n), "<= 2 s",
		fmt.Sprintf("%s (plain-client baseline p99 %s: %.2fx)", secs(p99), secs(percentile(baseSkews, 99)), p99.Seconds()/percentile(baseSkews, 99).Seconds()), p99 <= 2*time.Second)
	r.target("4", "every Deployment patched exactly once", fmt.Sprintf("%d/%d", n, n),
		fmt.Sprintf("%d/%d patched, %d more than once, %d wrong value, %d generation != 2", len(skews), n, twice, wrong, genOff),
		len(skews) == n && twice == 0 && wrong == 0 && genOff == 0)

	// Remove the Deployments' pods before the next benchmarks.
	return e.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
}
