package reliability

// Crash tests: each drives one kind's controller while startChaos SIGKILLs
// the manager at random moments, checks its invariants throughout from what
// the cluster did, and that it converges after the last kill.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestCrashSidecarSetInPlaceUpdate updates the sidecar image of a
// SidecarSet over n injected pods with maxUnavailable 10% while the manager
// is SIGKILLed at random moments. A watch over every pod checks that at no
// moment more than 10% of them are unavailable (not Ready, or a sidecar
// whose status does not yet report its spec image), that app containers
// never change, and the update completes.
func TestCrashSidecarSetInPlaceUpdate(t *testing.T) {
	minKills, minGap, maxGap := killPlan()
	n := scaled(20, 100)
	ns := namespace(t)
	labels := map[string]string{"app": "crash-sidecar"}
	by := createBystanders(t, ns, labels)
	s := sidecarSetOver("crash-"+ns, ns, labels, corev1.Container{Name: "sidecar", Image: "sidecar:1",
		SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false)}})
	s.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromString("10%"))
	// The bystander Deployment's pods opt out.
	s.Spec.InjectionStrategy.AllowOptOut = true
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
	waitRolledOut(t, s, n, 10*time.Minute, nil)
	w.assertHeld(t)
	figure(t, "SidecarSet in-place update over %d pods (maxUnavailable 10%% = %d): %d SIGKILLs survived, %d pod events checked, %s",
		n, budget, kills, w.Events(), time.Since(start).Round(time.Second))
	by.assertUntouched(t)
}

// TestCrashSidecarSetEvictRollout changes a sidecar's env (only recreating
// the pods applies it) under updateStrategy.recreate: Evict, over a
// Deployment whose PodDisruptionBudget allows one disruption, while the
// manager is SIGKILLed at random moments; the env is changed again each
// time a rollout completes until the kills are done. A watch over the pods
// checks that never more than one of them is unavailable (the PDB, which
// kube-controller-manager's disruption controller computes and the API
// server enforces on every eviction), that no pod is deleted twice, and
// that exactly one pod is deleted per pod and per rollout: nothing is
// evicted that did not need it, whatever the kills interrupted. The
// rollouts converge: every pod ends with the last env.
func TestCrashSidecarSetEvictRollout(t *testing.T) {
	minKills, minGap, maxGap := killPlan()
	n := scaled(4, 12)
	ns := namespace(t)
	podLabels := map[string]string{"app": "crash-evict"}
	s := sidecarSetOver("crash-evict-"+ns, ns, podLabels, corev1.Container{Name: "sidecar", Image: "sidecar:1",
		Env: []corev1.EnvVar{{Name: "VERSION", Value: "1"}}})
	// The controller's own budget is larger than the PDB's: the PDB is what
	// must hold.
	s.Spec.UpdateStrategy = deckhandv1alpha1.SidecarSetUpdateStrategy{
		MaxUnavailable: ptr.To(intstr.FromInt32(2)),
		Recreate:       deckhandv1alpha1.RecreateEvict,
	}
	retry(t, 2*time.Minute, "creating the SidecarSet", func(ctx context.Context) error { return suite.client.Create(ctx, s) })
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), s) })
	waitInjects(t, ns, podLabels)
	ctx := testutil.Context(t, 30*time.Minute)
	testutil.Create(ctx, t, suite.client, testutil.Deployment(ns, "app", int32(n), podLabels, corev1.Container{Name: "app", Image: "app:1"}))
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: podLabels}},
	}
	testutil.Create(ctx, t, suite.client, pdb)

	// version reports the env VERSION of a pod's sidecar.
	version := func(p *corev1.Pod) string {
		for _, c := range p.Spec.Containers {
			if c.Name == "sidecar" && len(c.Env) == 1 {
				return c.Env[0].Value
			}
		}
		return ""
	}
	waitAll := func(v string) {
		t.Helper()
		testutil.Eventually(t, 10*time.Minute, func(ctx context.Context) (bool, error) {
			pods, err := testutil.LivePods(ctx, suite.client, ns, podLabels)
			if err != nil {
				return false, err
			}
			at := 0
			for i := range pods {
				if version(&pods[i]) == v && podutil.IsPodReady(&pods[i]) {
					at++
				}
			}
			return orErr(at == n && len(pods) == n, fmt.Errorf("%d of %d pods (of %d live) Ready with VERSION=%s", at, n, len(pods), v))
		}, "every pod Ready with VERSION=%s", v)
	}
	waitAll("1")
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		got := &policyv1.PodDisruptionBudget{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(pdb), got); err != nil {
			return false, err
		}
		return orErr(got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == int32(n),
			fmt.Errorf("PDB status %+v", got.Status))
	}, "the disruption controller computes the PDB's status")

	w := testutil.WatchDisruptions(t, suite.clientset, ns, labels.SelectorFromSet(podLabels), n)
	// A pod its Deployment creates while the manager is down is admitted
	// without its sidecar (failurePolicy Ignore) and needs an eviction of its
	// own: those are the only deletions allowed beyond one per pod and rollout.
	var bareMu sync.Mutex
	bare := map[types.UID]string{}
	noteBare := func(p *corev1.Pod) {
		if version(p) == "" {
			bareMu.Lock()
			bare[p.UID] = p.Name
			bareMu.Unlock()
		}
	}
	stopBare := testutil.WatchPods(t, suite.clientset, ns, noteBare, func(_ watch.EventType, p *corev1.Pod) { noteBare(p) })
	setVersion := func(v string) {
		retry(t, 3*time.Minute, "changing the sidecar env", func(ctx context.Context) error {
			cur := &deckhandv1alpha1.SidecarSet{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
				return err
			}
			cur.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "VERSION", Value: v}}
			return suite.client.Update(ctx, cur)
		})
	}
	start := time.Now()
	c := startChaos(t, minGap, maxGap, minKills)
	rollouts := 0
	for v := 2; ; v++ {
		setVersion(fmt.Sprint(v))
		rollouts++
		waitAll(fmt.Sprint(v))
		if c.Kills() >= minKills {
			break
		}
	}
	kills := c.Stop(t)
	waitRolledOut(t, s, n, 5*time.Minute, func(st deckhandv1alpha1.SidecarSetStatus) bool {
		return st.NotUpdatablePods == 0 && st.EvictingPods == 0
	})
	w.Stop()

	if m := w.MaxUnavailable(); m > 1 {
		t.Errorf("%d of %d pods unavailable at once; the PodDisruptionBudget allows 1:\n%s", m, n, w.History())
	}
	for _, name := range w.UnexpectedDeletions(nil) {
		t.Errorf("pod %s deleted twice", name)
	}
	deleted, _ := w.Deleted()
	stopBare()
	bareDeleted := 0
	for _, uid := range deleted {
		if _, ok := bare[uid]; ok {
			bareDeleted++
		}
	}
	if len(deleted) != n*rollouts+bareDeleted {
		t.Errorf("%d pods deleted over %d rollouts of %d pods (%d of them admitted without the sidecar while the manager was down), want exactly %d (one per pod and rollout, plus those)",
			len(deleted), rollouts, n, bareDeleted, n*rollouts+bareDeleted)
	}
	figure(t, "SidecarSet recreate: Evict over %d pods under a PDB of maxUnavailable 1: %d rollouts, %d evictions (%d of pods admitted without the sidecar while the manager was down), %d SIGKILLs survived, at most %d unavailable, %s",
		n, rollouts, len(deleted), bareDeleted, kills, w.MaxUnavailable(), time.Since(start).Round(time.Second))
}

// createRestartTargets creates, in ns, a one-replica Deployment labelled
// deploymentLabels for each of names.
func createRestartTargets(ctx context.Context, t *testing.T, ns string, deploymentLabels map[string]string, names []string) {
	t.Helper()
	for _, name := range names {
		dep := testutil.Deployment(ns, name, 1, map[string]string{"app": name}, corev1.Container{Name: "app", Image: "app:1"})
		dep.Labels = deploymentLabels
		testutil.Create(ctx, t, suite.client, dep)
	}
}

// restartEvery10s is the RestartSchedule name in ns that rolls out, every
// 10s, the Deployments labelled restart=restart: all of targets at once.
func restartEvery10s(ns, name, restart string, targets []string) *deckhandv1alpha1.RestartSchedule {
	return &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Schedule:      "@every 10s",
			MaxConcurrent: int32(len(targets)),
			Target:        deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"restart": restart}}},
		},
	}
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
	createRestartTargets(ctx, t, ns, map[string]string{"tier": "restart", "restart": "nightly"}, targets)

	rs := restartEvery10s(ns, "every-10s", "nightly", targets)
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
	createRestartTargets(ctx, t, ns, map[string]string{"restart": "windowed"}, targets)
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
	rs := restartEvery10s(ns, "windowed", "windowed", targets)
	rs.Spec.Windows = windows
	rs.Spec.Jitter = &metav1.Duration{Duration: 3 * time.Second}
	// Room for the skipped entries besides the runs.
	rs.Spec.HistoryLimit = 100
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

// TestCrashPodSetScaleAndRollingUpdate scales a PodSet 0 -> n -> (rolling
// template update) -> 0, in cycles, while the manager is SIGKILLed at random
// moments. A watch over every pod of the namespace checks throughout that
// there are never more active pods than replicas (+ maxSurge during the
// update) and, during the update, never more unavailable than
// maxUnavailable, counting every pod its selector matches that no other
// object controls; pods of a bystander Deployment with the same labels are
// never touched; no pod of the PodSet (by owner reference, name or labels)
// is left once it is deleted.
func TestCrashPodSetScaleAndRollingUpdate(t *testing.T) {
	// The loop below runs cycles until minKills kills have happened;
	// cycleDeadline only bounds it. A bound in time, not in cycles: a cycle
	// of 30 pods takes about a second on a quiet machine and several on a
	// loaded one, while the kills come every minGap-maxGap whatever the
	// machine. Four times the longest gaps leaves room for the restarts
	// between them on a loaded machine.
	n, minKills := 30, 2
	minGap, maxGap := 3*time.Second, 8*time.Second
	if stress() {
		n, minKills = 300, 20
		minGap, maxGap = 2*time.Second, 10*time.Second
	}
	// Each kill also waits for the restarted manager to take the leader
	// Lease, which the killed one left to expire.
	cycleDeadline := time.Duration(minKills+1) * (maxGap + leaseTakenBound) * 4
	keepManagerLog(t)
	surge, unavailable := max(1, n/10), max(1, n/10)
	ns := namespace(t)
	podLabels := map[string]string{"app": "crash-podset"}
	by := createBystanders(t, ns, podLabels)
	w := watchPods(t, ns)

	ps := testutil.PodSet(ns, "crash", 0, podLabels, corev1.Container{
		Name: "app", Image: "app:1", Env: []corev1.EnvVar{{Name: "VERSION", Value: "0"}},
	})
	ps.Spec.UpdateStrategy = deckhandv1alpha1.PodSetUpdateStrategy{
		Type:              deckhandv1alpha1.RollingUpdatePodSetStrategyType,
		MaxSurge:          ptr.To(intstr.FromInt32(int32(surge))),
		MaxUnavailable:    ptr.To(intstr.FromInt32(int32(unavailable))),
		InPlaceIfPossible: ptr.To(false),
	}
	retry(t, 2*time.Minute, "creating the PodSet", func(ctx context.Context) error { return suite.client.Create(ctx, ps) })
	uid := ps.UID

	// The invariants, over every pod the PodSet's selector matches that no
	// other object controls: a pod created without its owner reference
	// counts too. The bystander Deployment's pods, with the same labels, have
	// their ReplicaSet; the bystander pod has other labels.
	sel := labels.SelectorFromSet(podLabels)
	mine := func(pods map[string]*corev1.Pod) (active, ready int, versions map[string]int) {
		versions = map[string]int{}
		for _, p := range pods {
			if !selects(sel, uid, p) {
				continue
			}
			active++
			if podutil.IsPodReady(p) {
				ready++
			}
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == "VERSION" {
					versions[e.Value]++
				}
			}
		}
		return active, ready, versions
	}
	var c *chaos
	scaleCheck := func(bound int) func(map[string]*corev1.Pod) error {
		return func(pods map[string]*corev1.Pod) error {
			if active, _, _ := mine(pods); active > bound {
				return fmt.Errorf("%d active pods, more than the %d replicas (%s)", active, bound, newestPods(pods, sel, uid, c))
			}
			return nil
		}
	}
	updateCheck := func(pods map[string]*corev1.Pod) error {
		active, ready, _ := mine(pods)
		if active > n+surge {
			return fmt.Errorf("%d active pods during the update, more than %d replicas + %d maxSurge", active, n, surge)
		}
		if n-ready > unavailable {
			return fmt.Errorf("%d of %d pods unavailable during the update, more than maxUnavailable %d", n-ready, n, unavailable)
		}
		return nil
	}
	// waitPods waits, on the watch's own view, for the PodSet's pods to be
	// exactly want active and ready at version.
	waitPods := func(want int, version string) {
		t.Helper()
		testutil.Eventually(t, 10*time.Minute, func(context.Context) (bool, error) {
			w.assertHeld(t) // a violation fails at once, not when the wait times out
			w.mu.Lock()
			active, ready, versions := mine(w.pods)
			w.mu.Unlock()
			if active == want && ready == want && (want == 0 || versions[version] == want) {
				return true, nil
			}
			return false, fmt.Errorf("active %d, ready %d, by version %v", active, ready, versions)
		}, "the PodSet has %d ready pods at version %s", want, version)
	}
	update := func(what string, mutate func(*deckhandv1alpha1.PodSet)) {
		t.Helper()
		retry(t, 3*time.Minute, what, func(ctx context.Context) error {
			cur := &deckhandv1alpha1.PodSet{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ps), cur); err != nil {
				return err
			}
			mutate(cur)
			return suite.client.Update(ctx, cur)
		})
	}

	start := time.Now()
	c = startChaos(t, minGap, maxGap, 0)
	cycles := 0
	for version := 1; time.Since(start) < cycleDeadline; version++ {
		cycles++
		w.setCheck(scaleCheck(n))
		update("scaling up", func(p *deckhandv1alpha1.PodSet) { p.Spec.Replicas = ptr.To(int32(n)) })
		waitPods(n, strconv.Itoa(version-1))

		w.setCheck(updateCheck)
		update("updating the template", func(p *deckhandv1alpha1.PodSet) {
			p.Spec.Template.Spec.Containers[0].Env[0].Value = strconv.Itoa(version)
		})
		waitPods(n, strconv.Itoa(version))

		w.setCheck(scaleCheck(n))
		update("scaling down", func(p *deckhandv1alpha1.PodSet) { p.Spec.Replicas = ptr.To(int32(0)) })
		waitPods(0, "")
		if c.Kills() >= minKills {
			break
		}
	}
	kills := c.Stop(t)
	w.assertHeld(t)
	if kills < minKills {
		t.Fatalf("only %d kills in %d cycles (%s); want at least %d", kills, cycles, time.Since(start).Round(time.Second), minKills)
	}
	takeovers := c.Takeovers()
	slices.Sort(takeovers)
	figure(t, "%d pods, %d cycles (scale 0->%d, rolling update maxSurge %d maxUnavailable %d, scale ->0), %d SIGKILLs survived (the restarted manager led %s-%s after each), %d pod events checked, %s",
		n, cycles, n, surge, unavailable, kills, takeovers[0].Round(100*time.Millisecond), takeovers[len(takeovers)-1].Round(100*time.Millisecond),
		w.Events(), time.Since(start).Round(time.Second))

	// Scale up once more and delete the PodSet: nothing it owned is left.
	update("scaling up before deletion", func(p *deckhandv1alpha1.PodSet) { p.Spec.Replicas = ptr.To(int32(min(n, 20))) })
	testutil.Eventually(t, 5*time.Minute, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		a, _, _ := mine(w.pods)
		return a == min(n, 20), nil
	}, "the PodSet has %d pods again", min(n, 20))
	retry(t, 2*time.Minute, "deleting the PodSet", func(ctx context.Context) error { return client.IgnoreNotFound(suite.client.Delete(ctx, ps)) })
	assertNoLeftovers(t, ns, deletedOwner{what: "the PodSet", uid: uid, name: ps.Name, selector: sel, podsOnly: true})
	by.assertUntouched(t)
}

// newestPods describes, for a violation's message, the three newest pods
// sel selects and when the manager was last killed: a pod created just
// after a kill points at a create the killed process had in flight.
func newestPods(pods map[string]*corev1.Pod, sel labels.Selector, uid types.UID, c *chaos) string {
	var mine []*corev1.Pod
	for _, p := range pods {
		if selects(sel, uid, p) {
			mine = append(mine, p)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].CreationTimestamp.After(mine[j].CreationTimestamp.Time) })
	var b strings.Builder
	for _, p := range mine[:min(3, len(mine))] {
		fmt.Fprintf(&b, "%s created %s; ", p.Name, p.CreationTimestamp.Format(time.RFC3339))
	}
	if c != nil && !c.LastKill().IsZero() {
		fmt.Fprintf(&b, "last kill %s", c.LastKill().Format(time.RFC3339Nano))
	} else {
		b.WriteString("no kill yet")
	}
	return b.String()
}

// keepManagerLog copies the manager's log (every process the suite has
// started, appended) into t's artifact directory when t ends, so that a
// run with -artifacts keeps what each process did around a violation.
func keepManagerLog(t *testing.T) {
	dir := t.ArtifactDir()
	t.Cleanup(func() {
		if err := os.WriteFile(filepath.Join(dir, "deckhand.log"), []byte(suite.deckhand.Logs(math.MaxInt)), 0o600); err != nil {
			t.Logf("keeping the manager log: %v", err)
		}
	})
}
