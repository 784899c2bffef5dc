package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

func killPlan() (minKills int, minGap, maxGap time.Duration) {
	if stress() {
		return 20, 2 * time.Second, 8 * time.Second
	}
	return 2, 3 * time.Second, 8 * time.Second
}

// TestCrashRestartScheduleFiring runs a RestartSchedule firing every 10s on
// the Deployments its selector matches while the manager is SIGKILLed at
// random moments. Rollouts are counted from what the cluster did (the
// Deployments' generation bumps), per slot: no slot rolls a Deployment out
// twice, no slot goes back, there are no more rollouts than slots, rollouts
// go on after the last kill, and a bystander Deployment with a near-miss
// label set sees none. The status history never records one slot twice.
func TestCrashRestartScheduleFiring(t *testing.T) {
	minKills, minGap, maxGap := killPlan()
	ns := namespace(t)
	// The bystander Deployment carries tier=restart like the targets, but
	// not the label the schedule selects.
	by := createBystanders(t, ns, map[string]string{"tier": "restart"})
	r := watchRollouts(t, ns)
	targets := []string{"target-a", "target-b"}
	ctx := testutil.Context(t, 30*time.Minute)
	for _, name := range targets {
		dep := testutil.Deployment(ns, name, 1, map[string]string{"app": name}, corev1.Container{Name: "app", Image: "app:1"})
		dep.Labels = map[string]string{"tier": "restart", "restart": "nightly"}
		testutil.Create(ctx, t, suite.client, dep)
	}

	rs := &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "every-10s", Namespace: ns},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Schedule:      "@every 10s",
			MaxConcurrent: int32(len(targets)),
			Target:        deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"restart": "nightly"}}},
		},
	}
	retry(t, 2*time.Minute, "creating the RestartSchedule", func(ctx context.Context) error { return suite.client.Create(ctx, rs) })
	c := startChaos(t, minGap, maxGap, minKills)
	c.Wait(t, minKills, 20*time.Minute)
	kills := c.Stop(t)
	// Converged: rollouts go on after the last kill.
	before := map[string]int{}
	for _, name := range targets {
		before[name] = r.Total(name)
	}
	testutil.Eventually(t, 3*time.Minute, func(context.Context) (bool, error) {
		for _, name := range targets {
			if n := r.Total(name); n < before[name]+2 {
				return false, fmt.Errorf("%s: %d rollouts, %d before the last kill", name, n, before[name])
			}
		}
		return true, nil
	}, "every target rolls out twice more after the last kill")
	elapsed := time.Since(rs.CreationTimestamp.Time)

	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) > 0 {
		t.Fatalf("rollout invariants violated:\n%s", strings.Join(r.violations, "\n"))
	}
	// Slots are 10s apart from the creation; one more for rounding.
	slots := int(elapsed/(10*time.Second)) + 1
	for _, name := range targets {
		if n := r.total[name]; n > slots {
			t.Errorf("Deployment %s rolled out %d times in %s: more than the %d slots", name, n, elapsed, slots)
		}
	}
	if n := r.total[bystanderName]; n > 0 {
		t.Errorf("the bystander Deployment, which the selector does not match, rolled out %d times: %v", n, r.perSlot[bystanderName])
	}
	cur := &deckhandv1alpha1.RestartSchedule{}
	if err := suite.client.Get(ctx, client.ObjectKeyFromObject(rs), cur); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, h := range cur.Status.History {
		key := h.Workload + "@" + h.ScheduledTime.UTC().Format(time.RFC3339)
		if seen[key] {
			t.Fatalf("status.history records %s twice: %+v", key, cur.Status.History)
		}
		seen[key] = true
	}
	figure(t, "RestartSchedule @every 10s on %d Deployments over %s: %v rollouts counted from generation bumps (at most one per slot, slots only forward), 0 on the bystander, %d SIGKILLs survived",
		len(targets), elapsed.Round(time.Second), r.total, kills)
	by.assertUntouched(t)
}

// TestCrashWebServerChurn creates, updates and deletes WebServers at random
// while the manager is SIGKILLed at random moments. At the end every live
// WebServer's Deployment and Service match its spec, nothing of a deleted
// WebServer is left, and the bystanders are untouched.
func TestCrashWebServerChurn(t *testing.T) {
	minKills, minGap, maxGap := killPlan()
	ns := namespace(t)
	by := createBystanders(t, ns, map[string]string{"app.kubernetes.io/name": "webserver"})
	live := map[string]*deckhandv1alpha1.WebServer{}
	var deleted []deletedOwner
	ops := 0
	start := time.Now()
	c := startChaos(t, minGap, maxGap, minKills)
	for i := 0; c.Kills() < minKills || i < 12; i++ {
		ops++
		switch op := rand.IntN(3); {
		case op == 0 || len(live) == 0:
			ws := &deckhandv1alpha1.WebServer{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("site-%d", i), Namespace: ns},
				Spec:       deckhandv1alpha1.WebServerSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1)},
			}
			retry(t, 3*time.Minute, "creating a WebServer", func(ctx context.Context) error {
				err := suite.client.Create(ctx, ws)
				if apierrors.IsAlreadyExists(err) {
					return suite.client.Get(ctx, client.ObjectKeyFromObject(ws), ws)
				}
				return err
			})
			live[ws.Name] = ws
		case op == 1:
			for _, ws := range live {
				retry(t, 3*time.Minute, "updating a WebServer", func(ctx context.Context) error {
					if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ws), ws); err != nil {
						return err
					}
					ws.Spec.Image = fmt.Sprintf("nginx:1.%d", 20+rand.IntN(9))
					ws.Spec.Replicas = ptr.To(int32(rand.IntN(3)))
					return suite.client.Update(ctx, ws)
				})
				break
			}
		default:
			for name, ws := range live {
				retry(t, 3*time.Minute, "deleting a WebServer", func(ctx context.Context) error {
					return client.IgnoreNotFound(suite.client.Delete(ctx, ws))
				})
				deleted = append(deleted, deletedOwner{what: "WebServer " + ws.Name, uid: ws.UID, name: ws.Name,
					selector: labels.SelectorFromSet(labels.Set{
						deckhandv1alpha1.WebServerNameLabel:     deckhandv1alpha1.WebServerNameLabelValue,
						deckhandv1alpha1.WebServerInstanceLabel: ws.Name,
					})})
				delete(live, name)
				break
			}
		}
		time.Sleep(time.Duration(rand.IntN(1500)) * time.Millisecond)
		if i > 400 {
			break
		}
	}
	kills := c.Stop(t)
	for _, ws := range live {
		testutil.Eventually(t, 5*time.Minute, func(ctx context.Context) (bool, error) {
			cur := &deckhandv1alpha1.WebServer{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ws), cur); err != nil {
				return false, err
			}
			d := &appsv1.Deployment{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ws), d); err != nil {
				return false, err
			}
			svc := &corev1.Service{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ws), svc); err != nil {
				return false, err
			}
			img := d.Spec.Template.Spec.Containers[0].Image
			if img != cur.Spec.Image || *d.Spec.Replicas != *cur.Spec.Replicas || cur.Status.ObservedGeneration != cur.Generation {
				return false, fmt.Errorf("deployment %s x%d, spec %s x%d, observed generation %d of %d",
					img, *d.Spec.Replicas, cur.Spec.Image, *cur.Spec.Replicas, cur.Status.ObservedGeneration, cur.Generation)
			}
			return true, nil
		}, "WebServer %s converged", ws.Name)
	}
	for _, o := range deleted {
		assertNoLeftovers(t, ns, o)
	}
	figure(t, "%d WebServer create/update/delete operations, %d live at the end and converged, %d deleted with nothing left, %d SIGKILLs survived, %s",
		ops, len(live), len(deleted), kills, time.Since(start).Round(time.Second))
	by.assertUntouched(t)
}

// TestCrashSidecarSetInPlaceUpdate updates the sidecar image of a
// SidecarSet over n injected pods with maxUnavailable 10% while the manager
// is SIGKILLed at random moments. A watch over every pod checks that at no
// moment more than 10% of them are unavailable (not Ready, or a sidecar
// whose status does not yet report its spec image), that app containers
// never change, and the update completes.
func TestCrashSidecarSetInPlaceUpdate(t *testing.T) {
	minKills, minGap, maxGap := killPlan()
	n := 20
	if stress() {
		n = 100
	}
	ns := namespace(t)
	labels := map[string]string{"app": "crash-sidecar"}
	by := createBystanders(t, ns, labels)
	s := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "crash-" + ns},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace: ns,
			Selector:  &metav1.LabelSelector{MatchLabels: labels},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "sidecar", Image: "sidecar:1",
				SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)}}}},
			UpdateStrategy: deckhandv1alpha1.SidecarSetUpdateStrategy{MaxUnavailable: ptr.To(intstr.FromString("10%"))},
			// The bystander Deployment's pods opt out.
			InjectionStrategy: deckhandv1alpha1.SidecarSetInjectionStrategy{AllowOptOut: true},
		},
	}
	retry(t, 2*time.Minute, "creating the SidecarSet", func(ctx context.Context) error { return suite.client.Create(ctx, s) })
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), s) })
	waitInjects(t, ns, labels)
	for i := range n {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i), Namespace: ns, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		}
		if err := suite.client.Create(testutil.Context(t, time.Minute), p); err != nil {
			t.Fatal(err)
		}
		if len(p.Spec.Containers) != 2 {
			t.Fatalf("pod %s was not injected: %d containers", p.Name, len(p.Spec.Containers))
		}
	}
	w := watchPods(t, ns)
	sidecarImage := func(p *corev1.Pod) (spec, status string) {
		for _, c := range p.Spec.Containers {
			if c.Name == "sidecar" {
				spec = c.Image
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "sidecar" {
				status = cs.Image
			}
		}
		return spec, status
	}
	// The SidecarSet's pods; the bystander Deployment's pods carry the same
	// app label but skip injection.
	isApp := func(p *corev1.Pod) bool { return p.Labels["app"] == "crash-sidecar" && p.Labels["bystander"] == "" }
	count := func(pods map[string]*corev1.Pod) (ready, updated int) {
		for _, p := range pods {
			if !isApp(p) || !podActive(p) {
				continue
			}
			spec, status := sidecarImage(p)
			if podutil.IsPodReady(p) && spec == status {
				ready++
				if spec == "sidecar:2" {
					updated++
				}
			}
		}
		return ready, updated
	}
	testutil.Eventually(t, 5*time.Minute, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		r, _ := count(w.pods)
		return orErr(r == n, fmt.Errorf("%d of %d ready", r, n))
	}, "all %d injected pods are Ready", n)
	budget := (n*10 + 99) / 100
	w.setCheck(func(pods map[string]*corev1.Pod) error {
		ready, _ := count(pods)
		for _, p := range pods {
			if isApp(p) && (len(p.Spec.Containers) != 2 || p.Spec.Containers[1].Image != "app:1") {
				return fmt.Errorf("the containers of %s changed: %+v", p.Name, p.Spec.Containers)
			}
		}
		if n-ready > budget {
			return fmt.Errorf("%d of %d pods unavailable, more than maxUnavailable 10%% (%d)", n-ready, n, budget)
		}
		return nil
	})

	start := time.Now()
	c := startChaos(t, minGap, maxGap, minKills)
	retry(t, 3*time.Minute, "updating the sidecar image", func(ctx context.Context) error {
		cur := &deckhandv1alpha1.SidecarSet{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return err
		}
		cur.Spec.Containers[0].Image = "sidecar:2"
		return suite.client.Update(ctx, cur)
	})
	// In make stress the update of 100 pods takes longer than 20 kills;
	// toggling the image keeps the work going until the kills are done.
	for version := 2; c.Kills() < minKills; version++ {
		img := fmt.Sprintf("sidecar:%d", version)
		testutil.Eventually(t, 10*time.Minute, func(context.Context) (bool, error) {
			w.mu.Lock()
			defer w.mu.Unlock()
			upd := 0
			for _, p := range w.pods {
				if spec, status := sidecarImage(p); isApp(p) && spec == img && status == img && podutil.IsPodReady(p) {
					upd++
				}
			}
			return orErr(upd == n, fmt.Errorf("%d of %d at %s", upd, n, img))
		}, "every pod runs %s", img)
		if c.Kills() >= minKills {
			break
		}
		next := fmt.Sprintf("sidecar:%d", version+1)
		retry(t, 3*time.Minute, "updating the sidecar image again", func(ctx context.Context) error {
			cur := &deckhandv1alpha1.SidecarSet{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
				return err
			}
			cur.Spec.Containers[0].Image = next
			return suite.client.Update(ctx, cur)
		})
	}
	kills := c.Stop(t)
	testutil.Eventually(t, 10*time.Minute, func(ctx context.Context) (bool, error) {
		cur := &deckhandv1alpha1.SidecarSet{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return false, err
		}
		st := cur.Status
		return orErr(st.ObservedGeneration == cur.Generation && st.UpdatedReadyPods == int32(n) && st.MatchedPods == int32(n),
			fmt.Errorf("status %+v", st))
	}, "the SidecarSet reports all %d pods updated and ready", n)
	w.assertHeld(t)
	figure(t, "SidecarSet in-place update over %d pods (maxUnavailable 10%% = %d): %d SIGKILLs survived, %d pod events checked, %s",
		n, budget, kills, w.Events(), time.Since(start).Round(time.Second))
	by.assertUntouched(t)
}

// TestCrashRestartScheduleWindow runs a RestartSchedule firing every 10s,
// with jitter, inside one-minute maintenance windows that open every other
// minute (outsideWindowPolicy Skip), while the manager is SIGKILLed at
// random moments. Rollouts are counted as in TestCrashRestartScheduleFiring:
// no slot rolls a Deployment out twice and slots only go forward; besides,
// every slot that rolled a Deployment out lies inside a window, slots
// outside them are recorded as skipped, and rollouts go on in the next
// window that opens after the last kill.
func TestCrashRestartScheduleWindow(t *testing.T) {
	minKills, minGap, maxGap := killPlan()
	ns := namespace(t)
	r := watchRollouts(t, ns)
	targets := []string{"window-a", "window-b"}
	ctx := testutil.Context(t, 30*time.Minute)
	for _, name := range targets {
		dep := testutil.Deployment(ns, name, 1, map[string]string{"app": name}, corev1.Container{Name: "app", Image: "app:1"})
		dep.Labels = map[string]string{"restart": "windowed"}
		testutil.Create(ctx, t, suite.client, dep)
	}
	// One-minute windows every other minute, for longer than the test runs
	// (UTC, the schedule's time zone).
	first := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	var windows []deckhandv1alpha1.RestartWindow
	open := map[string]bool{} // "15:04" minutes inside a window
	for i := range 16 {
		start := first.Add(time.Duration(2*i) * time.Minute)
		windows = append(windows, deckhandv1alpha1.RestartWindow{Start: start.Format("15:04"), End: start.Add(time.Minute).Format("15:04")})
		open[start.Format("15:04")] = true
	}
	rs := &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "windowed", Namespace: ns},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Schedule:      "@every 10s",
			MaxConcurrent: int32(len(targets)),
			Target:        deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"restart": "windowed"}}},
			Windows:       windows,
			Jitter:        &metav1.Duration{Duration: 3 * time.Second},
			// Room for the skipped entries besides the runs.
			HistoryLimit: 100,
		},
	}
	retry(t, 2*time.Minute, "creating the RestartSchedule", func(ctx context.Context) error { return suite.client.Create(ctx, rs) })
	// The kills start a few seconds before the first window opens (at most
	// a minute away), so that they fall on both sides of its opening and on
	// the runs inside it, not on a quiet stretch before any window.
	select {
	case <-time.After(time.Until(first.Add(-5 * time.Second))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	c := startChaos(t, minGap, maxGap, minKills)
	c.Wait(t, minKills, 20*time.Minute)
	kills := c.Stop(t)
	// Converged: every target rolls out in the next window that opens after
	// the last kill, past a closed minute whose slots must all be skipped.
	stopped := time.Now().UTC()
	var next time.Time
	for i := range 16 {
		if start := first.Add(time.Duration(2*i) * time.Minute); start.After(stopped) {
			next = start
			break
		}
	}
	testutil.Eventually(t, 4*time.Minute, func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, name := range targets {
			ok := false
			for slot := range r.perSlot[name] {
				if st, err := time.Parse(time.RFC3339, slot); err == nil && !st.Before(next) {
					ok = true
				}
			}
			if !ok {
				return false, fmt.Errorf("%s: no rollout for a slot from %s on: %v", name, next.Format(time.RFC3339), r.perSlot[name])
			}
		}
		return true, nil
	}, "every target rolls out in the window opening at %s, after the last kill", next.Format(time.RFC3339))

	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.violations) > 0 {
		t.Fatalf("rollout invariants violated:\n%s", strings.Join(r.violations, "\n"))
	}
	for _, name := range targets {
		for slot := range r.perSlot[name] {
			st, err := time.Parse(time.RFC3339, slot)
			if err != nil {
				continue // reported as a violation above
			}
			if !open[st.UTC().Format("15:04")] {
				t.Errorf("Deployment %s rolled out for slot %s, outside every window", name, slot)
			}
		}
	}
	cur := &deckhandv1alpha1.RestartSchedule{}
	if err := suite.client.Get(ctx, client.ObjectKeyFromObject(rs), cur); err != nil {
		t.Fatal(err)
	}
	seen, skipped := map[string]bool{}, 0
	for _, h := range cur.Status.History {
		if h.Result == deckhandv1alpha1.RestartSkipped && strings.Contains(h.Message, "outside every maintenance window") {
			skipped++
		}
		if h.Workload == "" {
			continue
		}
		key := h.Workload + "@" + h.ScheduledTime.UTC().Format(time.RFC3339)
		if seen[key] {
			t.Fatalf("status.history records %s twice: %+v", key, cur.Status.History)
		}
		seen[key] = true
	}
	if skipped == 0 {
		t.Errorf("no slot of a closed minute was recorded as skipped: %+v", cur.Status.History)
	}
	if cur.Status.NextRunTime == nil {
		t.Errorf("status.nextRunTime unset: %+v", cur.Status)
	}
	figure(t, "RestartSchedule @every 10s in one-minute windows every other minute, jitter 3s, on %d Deployments: %v rollouts (at most one per slot, every slot in a window), %d skipped-slot entries in the history, %d SIGKILLs survived",
		len(targets), r.total, skipped, kills)
}
