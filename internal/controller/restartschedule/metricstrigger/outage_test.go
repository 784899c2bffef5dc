package metricstrigger_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	restartschedule "github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
	"github.com/deckhand-dev/deckhand/internal/eviction"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// metrics-server stops while a pod leaks past a memory trigger's threshold,
// its `for` already counting. Deckhand acts on no sample it can no longer
// refresh: past the moment the last samples would have had the pod evicted,
// nothing is evicted, MetricsUnavailable is True with MetricsAPIUnavailable,
// a Warning Event says so and the data-missing metric counts it. Once
// metrics-server serves again, a PodDisruptionBudget holds the eviction
// (refused and counted); once the budget is deleted, the leaking pod is
// replaced and the flat one is left alone.
func TestIntegrationMemoryMetricsServerStopped(t *testing.T) {
	const sustained = 30 * time.Second
	leak := startMemoryLeak(t, 6*time.Minute, "4Mi")
	rs := leak.schedule(t, "mem", memoryTrigger(50, sustained))
	waitHeld(t, rs, leak.leaking, deckhandv1alpha1.RestartTriggerMemory, heldFor(sustained), 2*time.Minute)

	counted := dataMissing(t, restartschedule.ReasonMetricsAPIUnavailable)
	stopMetricsServer(t)
	unavailable := func(got *deckhandv1alpha1.RestartSchedule) *metav1.Condition {
		c := meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != restartschedule.ReasonMetricsAPIUnavailable {
			return nil
		}
		return c
	}
	got := waitSchedule(t, rs, time.Minute, "MetricsUnavailable says MetricsAPIUnavailable", func(got *deckhandv1alpha1.RestartSchedule) bool {
		return unavailable(got) != nil
	})
	if msg := unavailable(got).Message; !strings.Contains(msg, "metrics.k8s.io") {
		t.Errorf("MetricsUnavailable message %q does not name metrics.k8s.io", msg)
	}
	testutil.WaitEvent(t, env.Client, leak.ns, 30*time.Second, "a MetricsAPIUnavailable Warning Event", func(e eventsv1.Event) bool {
		return e.Type == corev1.EventTypeWarning && e.Reason == restartschedule.ReasonMetricsAPIUnavailable &&
			e.Regarding.Kind == "RestartSchedule" && e.Regarding.Name == rs.Name
	})
	if now := dataMissing(t, restartschedule.ReasonMetricsAPIUnavailable); now <= counted {
		t.Errorf("deckhand_restartschedule_trigger_data_missing_total{reason=%s} %v, was %v: not counted",
			restartschedule.ReasonMetricsAPIUnavailable, now, counted)
	}

	// The leaking pod crossed the threshold before metrics-server stopped,
	// so `for` after the condition turned True the last samples would
	// have had it evicted; three evaluations (2s apart) after that, still
	// nothing.
	got = waitSchedule(t, rs, 2*time.Minute, "MetricsAPIUnavailable for `for` and three evaluations", func(got *deckhandv1alpha1.RestartSchedule) bool {
		c := unavailable(got)
		return c != nil && c.LastTransitionTime.Add(sustained+6*time.Second).Before(time.Now())
	})
	if len(got.Status.Candidates) > 0 || len(got.Status.History) > 0 {
		t.Fatalf("acted while the metrics API was down: candidates %+v, history %+v", got.Status.Candidates, got.Status.History)
	}
	if deleted, _ := leak.watch.Deleted(); len(deleted) > 0 {
		t.Fatalf("pods deleted while the metrics API was down:\n%s", leak.watch.History())
	}

	// Back with a budget that allows no disruption: the eviction is
	// refused and counted, the pod held by the budget, until the budget
	// goes.
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: leak.ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: leak.deployment.Spec.Selector}}
	testutil.Create(leak.ctx, t, env.Client, pdb)
	evictions := func(result eviction.Result) float64 {
		return counterValue(t, "deckhand_restartschedule_pod_evictions_total", map[string]string{"trigger": "Memory", "result": result.String()})
	}
	blocked, evictedCount := evictions(eviction.Blocked), evictions(eviction.Evicted)
	if err := env.Cluster.StartMetricsServer(leak.ctx); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, rs, leak.leaking, deckhandv1alpha1.RestartTriggerMemory, "PodDisruptionBudget: ", 3*time.Minute)
	if now := evictions(eviction.Blocked); now <= blocked {
		t.Errorf("deckhand_restartschedule_pod_evictions_total{trigger=Memory,result=blocked} %v, was %v: the refusal not counted", now, blocked)
	}
	if err := env.Client.Delete(leak.ctx, pdb); err != nil {
		t.Fatal(err)
	}
	evicted := waitEvicted(t, rs, deckhandv1alpha1.RestartTriggerMemory, 2*time.Minute)
	if evicted.Pod != leak.leaking || evicted.Result != deckhandv1alpha1.RestartSucceeded {
		t.Fatalf("history entry %+v, want the leaking pod %s evicted", evicted, leak.leaking)
	}
	if now := evictions(eviction.Evicted); now != evictedCount+1 {
		t.Errorf("deckhand_restartschedule_pod_evictions_total{trigger=Memory,result=success} %v, was %v: want the one eviction counted", now, evictedCount)
	}
	waitSchedule(t, rs, time.Minute, "MetricsUnavailable False once metrics-server serves", func(got *deckhandv1alpha1.RestartSchedule) bool {
		return meta.IsStatusConditionFalse(got.Status.Conditions, deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition)
	})
	onlyDeleted(t, leak.watch, leak.leaking)
}
