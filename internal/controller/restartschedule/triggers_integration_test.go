package restartschedule_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// podAgeSchedule is a RestartSchedule with no schedule and one podAge
// trigger.
func podAgeSchedule(ns, name, target string, maxAge, minPodAge time.Duration) *deckhandv1alpha1.RestartSchedule {
	return &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Target:   targetRef(target),
			Triggers: []deckhandv1alpha1.RestartNeedTrigger{{PodAge: &deckhandv1alpha1.RestartPodAgeTrigger{MaxAge: metav1.Duration{Duration: maxAge}}}},
			Action: deckhandv1alpha1.RestartAction{Scope: deckhandv1alpha1.RestartScopePod, MaxConcurrent: 1,
				MinPodAge: &metav1.Duration{Duration: minPodAge}},
		},
	}
}

// waitCandidates waits until the schedule lists n candidates that all
// satisfy match.
func waitCandidates(t *testing.T, ns, name string, n int, what string, match func(deckhandv1alpha1.RestartCandidate) bool) *deckhandv1alpha1.RestartSchedule {
	t.Helper()
	return waitRS(t, ns, name, 90*time.Second, fmt.Sprintf("lists %d candidates %s", n, what), func(rs *deckhandv1alpha1.RestartSchedule) bool {
		if len(rs.Status.Candidates) != n || rs.Status.CandidateCount != int32(n) {
			return false
		}
		for _, c := range rs.Status.Candidates {
			if !match(c) {
				return false
			}
		}
		return true
	})
}

// A podAge trigger replaces pods through the Eviction API: while a
// PodDisruptionBudget refuses every eviction (429), nothing is evicted or
// deleted and the candidates say the budget holds them; once the budget is
// gone, the old pods are evicted one at a time (maxConcurrent 1: never more
// than one pod of the Deployment unavailable), each recorded in history with
// its trigger and value. Each next turn comes when the replacement turns
// Ready: the three evictions fit in 90 s, polls are a minute apart (seen
// failing without the pod watch).
func TestIntegrationPodAgeEvictsThroughBudget(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	const replicas = 3
	old := rolledOutPods(t, newDeployment(ns, "web", replicas, nil, nil))
	if len(old) != replicas {
		t.Fatalf("pods %v, want %d", old, replicas)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}},
	}
	create(t, pdb)
	// The budget allows no disruption once its controller has counted the pods.
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		p := &policyv1.PodDisruptionBudget{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "web"}, p); err != nil {
			return false, err
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == replicas, nil
	}, "PodDisruptionBudget counts the pods")

	// minPodAge well above maxAge: the replacements stay untouched for the
	// rest of the test.
	create(t, podAgeSchedule(ns, "age", "web", 2*time.Second, 20*time.Second))
	watch := testutil.WatchDisruptions(t, env.Clientset, ns, labels.SelectorFromSet(labels.Set{"app": "web"}), replicas)

	// The oldest is refused by the budget; the others wait for it.
	rs := waitCandidates(t, ns, "age", replicas, "held by the budget", func(c deckhandv1alpha1.RestartCandidate) bool {
		return old[c.Pod] && c.Trigger == deckhandv1alpha1.RestartTriggerPodAge &&
			(strings.HasPrefix(c.HeldBy, "PodDisruptionBudget: The disruption budget web needs 3 healthy pods") || strings.HasPrefix(c.HeldBy, "maxConcurrent 1: after the eviction of "))
	})
	if h := rs.Status.Candidates[0].HeldBy; !strings.HasPrefix(h, "PodDisruptionBudget: ") {
		t.Fatalf("the worst candidate is held by %q, want the budget", h)
	}
	if c := meta.FindStatusCondition(rs.Status.Conditions, deckhandv1alpha1.RestartScheduleTriggeredCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Triggered condition %+v, want True", c)
	}
	// Refused evictions are asked again, never forced.
	consistently(t, 3*time.Second, func(ctx context.Context) error {
		if d, _ := watch.Deleted(); len(d) > 0 {
			return fmt.Errorf("a pod was deleted while the budget refused every eviction:\n%s", watch.History())
		}
		return nil
	})
	if rs, err := getRS(ctx(t), ns, "age"); err != nil || len(rs.Status.History) > 0 {
		t.Fatalf("history while nothing was evicted: %+v (%v)", rs.Status.History, err)
	}

	if err := env.Client.Delete(ctx(t), pdb); err != nil {
		t.Fatal(err)
	}
	rs = waitRS(t, ns, "age", 90*time.Second, "every old pod evicted and recorded", func(rs *deckhandv1alpha1.RestartSchedule) bool {
		n := 0
		for _, h := range rs.Status.History {
			if evictedOld(h, old) {
				n++
			}
		}
		return n == replicas
	})
	for _, h := range rs.Status.History {
		if h.Workload != "Deployment/web" || !strings.HasSuffix(h.Value, " old") || h.Result != deckhandv1alpha1.RestartSucceeded {
			t.Errorf("history entry %+v", h)
		}
	}
	waitRolledOut(t, ns, "web")
	// Stop before the replacements reach minPodAge.
	if err := env.Client.Delete(ctx(t), rs); err != nil {
		t.Fatal(err)
	}
	if m := watch.MaxUnavailable(); m != 1 {
		t.Fatalf("at most %d pod(s) unavailable at once, want 1 (maxConcurrent 1):\n%s", m, watch.History())
	}
	deleted, names := watch.Deleted()
	for _, uid := range deleted {
		if !old[names[uid]] {
			t.Errorf("%s was deleted, a replacement younger than minPodAge", names[uid])
		}
	}
}

func evictedOld(h deckhandv1alpha1.RestartRecord, old map[string]bool) bool {
	return h.Trigger == deckhandv1alpha1.RestartTriggerPodAge && old[h.Pod]
}

// dryRun lists the candidates, says so in the Triggered condition, and
// evicts nothing.
func TestIntegrationPodAgeDryRun(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	old := rolledOutPods(t, newDeployment(ns, "web", 2, nil, nil))
	rs := podAgeSchedule(ns, "age", "web", time.Second, 0)
	rs.Spec.DryRun = true
	create(t, rs)
	waitCandidates(t, ns, "age", 2, "held by dryRun", func(c deckhandv1alpha1.RestartCandidate) bool {
		return old[c.Pod] && c.HeldBy == "dryRun" && c.Since != nil && c.Limit == "1s"
	})
	consistently(t, 3*time.Second, func(ctx context.Context) error {
		rs, err := getRS(ctx, ns, "age")
		if err != nil {
			return err
		}
		if len(rs.Status.History) > 0 {
			return fmt.Errorf("dryRun recorded %+v", rs.Status.History)
		}
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil || !old[p.Name] {
				return fmt.Errorf("dryRun replaced a pod: %s", p.Name)
			}
		}
		return nil
	})
}

// Triggers make the schedule optional, and are refused by the real API
// server naming the field when they are wrong; their action is defaulted to
// one pod at a time through the Eviction API.
func TestIntegrationTriggerValidation(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	target := map[string]any{"targetRef": map[string]any{"kind": "Deployment", "name": "web"}}
	cases := map[string]struct {
		spec       map[string]any
		field, msg string
	}{
		"neither schedule nor triggers": {map[string]any{"target": target}, "spec.schedule", "unless triggers are set"},
		"empty trigger":                 {map[string]any{"target": target, "triggers": []any{map[string]any{}}}, "spec.triggers[0]", "exactly one kind of trigger"},
		"maxAge zero": {map[string]any{"target": target, "triggers": []any{map[string]any{"podAge": map[string]any{"maxAge": "0s"}}}},
			"spec.triggers[0].podAge.maxAge", "between 1s and 8760h"},
		"scope": {map[string]any{"target": target, "triggers": []any{map[string]any{"podAge": map[string]any{"maxAge": "1h"}}}, "action": map[string]any{"scope": "Node"}},
			"spec.action.scope", "Unsupported value"},
		"negative cooldown": {map[string]any{"target": target, "triggers": []any{map[string]any{"podAge": map[string]any{"maxAge": "1h"}}}, "action": map[string]any{"cooldown": "-1s"}},
			"spec.action.cooldown", "between 0s and 168h"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := env.Client.Create(ctx(t), unstructuredRS(ns, "invalid", tc.spec))
			if err == nil {
				t.Fatalf("accepted")
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not name %s (with %q)", err, tc.field, tc.msg)
			}
		})
	}
	spec := map[string]any{"target": target, "triggers": []any{map[string]any{"podAge": map[string]any{"maxAge": "24h"}}}}
	if err := env.Client.Create(ctx(t), unstructuredRS(ns, "ok", spec)); err != nil {
		t.Fatalf("triggers without a schedule were refused: %v", err)
	}
	rs, err := getRS(ctx(t), ns, "ok")
	if err != nil {
		t.Fatal(err)
	}
	a := rs.Spec.Action
	if a.Scope != deckhandv1alpha1.RestartScopePod || a.MaxConcurrent != 1 || a.MinPodAge == nil || a.MinPodAge.Duration != 10*time.Minute ||
		a.Cooldown == nil || a.Cooldown.Duration != 0 || rs.Spec.DryRun {
		t.Fatalf("action defaults: %+v", a)
	}
	// No schedule is not an invalid schedule: Ready, restarting on need.
	waitRS(t, ns, "ok", 30*time.Second, "a schedule-less RestartSchedule is Ready", func(rs *deckhandv1alpha1.RestartSchedule) bool {
		ready := meta.FindStatusCondition(rs.Status.Conditions, deckhandv1alpha1.ReadyCondition)
		invalid := meta.FindStatusCondition(rs.Status.Conditions, deckhandv1alpha1.RestartScheduleInvalidScheduleCondition)
		return ready != nil && ready.Status == metav1.ConditionTrue && invalid != nil && invalid.Status == metav1.ConditionFalse &&
			rs.Status.NextScheduleTime == nil
	})
}

// Without the resource metrics API (this control plane serves no
// metrics.k8s.io), a memory trigger acts on nothing and says why: the
// MetricsUnavailable condition, while podAge triggers of the same schedule
// are not affected.
func TestIntegrationMemoryWithoutMetricsAPI(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	old := rolledOutPods(t, newDeployment(ns, "web", 2, nil, nil))
	rs := podAgeSchedule(ns, "mem", "web", time.Hour, 0)
	rs.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{
		Above: ptr.To(resource.MustParse("1")), For: &metav1.Duration{}}}}
	create(t, rs)
	waitRS(t, ns, "mem", 60*time.Second, "MetricsUnavailable says the metrics API is unavailable", func(rs *deckhandv1alpha1.RestartSchedule) bool {
		c := meta.FindStatusCondition(rs.Status.Conditions, deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "MetricsAPIUnavailable" &&
			strings.Contains(c.Message, "metrics.k8s.io PodMetrics")
	})
	consistently(t, 3*time.Second, func(ctx context.Context) error {
		rs, err := getRS(ctx, ns, "mem")
		if err != nil {
			return err
		}
		if len(rs.Status.History) > 0 || len(rs.Status.Candidates) > 0 {
			return fmt.Errorf("acted without data: candidates %+v, history %+v", rs.Status.Candidates, rs.Status.History)
		}
		for p := range podNames(t, ns, "web") {
			if !old[p] {
				return fmt.Errorf("a pod was replaced: %s", p)
			}
		}
		return nil
	})
}

// With action scope Workload, a pod past a podAge trigger's maxAge starts
// the rolling restart of its whole Deployment, by the path of a scheduled
// run: the pod template's restarted-at annotation, the Deployment's own
// strategy replacing every pod, history recording the trigger, the pod and
// its age once the rollout completes. The replacements, past maxAge in
// turn, wait for the workload's cooldown: one restart, not one a pod.
func TestIntegrationPodAgeScopeWorkloadRestartsTheWorkload(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	old := rolledOutPods(t, newDeployment(ns, "web", 2, nil, nil))
	rs := podAgeSchedule(ns, "age", "web", 2*time.Second, 0)
	rs.Spec.Action.Scope = deckhandv1alpha1.RestartScopeWorkload
	rs.Spec.Action.Cooldown = &metav1.Duration{Duration: time.Hour}
	create(t, rs)

	byTrigger := func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Trigger == deckhandv1alpha1.RestartTriggerPodAge && h.Workload == "Deployment/web"
	}
	got := waitHistory(t, ns, "age", "the restart the podAge trigger started", byTrigger)
	restarted := got.Status.History[slices.IndexFunc(got.Status.History, byTrigger)]
	if restarted.Result != deckhandv1alpha1.RestartSucceeded || !old[restarted.Pod] || !strings.HasSuffix(restarted.Value, " old") {
		t.Fatalf("history entry %+v, want the Deployment restarted for an old pod, with its age", restarted)
	}
	d := waitRolledOut(t, ns, "web")
	if at := d.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]; at != restarted.ScheduledTime.UTC().Format(time.RFC3339) {
		t.Fatalf("restarted-at %q, want the restart's time %s", at, restarted.ScheduledTime.UTC().Format(time.RFC3339))
	}
	for p := range podNames(t, ns, "web") {
		if old[p] {
			t.Fatalf("pod %s was not replaced by the rolling restart", p)
		}
	}
	waitCandidates(t, ns, "age", 2, "held by the workload's cooldown", func(c deckhandv1alpha1.RestartCandidate) bool {
		return !old[c.Pod] && strings.HasPrefix(c.HeldBy, "cooldown 1h0m0s: ")
	})
	if rs, err := getRS(ctx(t), ns, "age"); err != nil || len(rs.Status.History) != 1 {
		t.Fatalf("history %+v (%v), want the one restart", rs.Status.History, err)
	}
}
