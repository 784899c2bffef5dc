package metricstrigger_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

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
	leak := startMemoryLeak(t, 6*time.Minute, "4Mi")
	ctx, ns, leaking, watch := leak.ctx, leak.ns, leak.leaking, leak.watch

	const sustained = 30 * time.Second
	rs := podScope(ns, "mem", "web", memoryTrigger(50, sustained))
	testutil.Create(ctx, t, env.Client, rs)
	held := fmt.Sprintf("for %s: above the threshold since ", sustained)
	waitSchedule(t, rs, 2*time.Minute, "the leaking pod is a candidate held "+held, func(got *deckhandv1alpha1.RestartSchedule) bool {
		return slices.ContainsFunc(got.Status.Candidates, func(c deckhandv1alpha1.RestartCandidate) bool {
			return c.Pod == leaking && strings.HasPrefix(c.HeldBy, held)
		})
	})

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
	expectWarningEvent(t, ns, rs.Name, restartschedule.ReasonMetricsAPIUnavailable)
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
	if deleted, _ := watch.Deleted(); len(deleted) > 0 {
		t.Fatalf("pods deleted while the metrics API was down:\n%s", watch.History())
	}

	// Back with a budget that allows no disruption: the eviction is
	// refused and counted, the pod held by the budget, until the budget
	// goes.
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: leak.deployment.Spec.Selector}}
	testutil.Create(ctx, t, env.Client, pdb)
	evictions := func(result eviction.Result) float64 {
		return counterValue(t, "deckhand_restartschedule_pod_evictions_total", map[string]string{"trigger": "Memory", "result": result.String()})
	}
	blocked, evictedCount := evictions(eviction.Blocked), evictions(eviction.Evicted)
	if err := env.Cluster.StartMetricsServer(ctx); err != nil {
		t.Fatal(err)
	}
	waitSchedule(t, rs, 3*time.Minute, "the leaking pod held by the PodDisruptionBudget", func(got *deckhandv1alpha1.RestartSchedule) bool {
		return slices.ContainsFunc(got.Status.Candidates, func(c deckhandv1alpha1.RestartCandidate) bool {
			return c.Pod == leaking && strings.HasPrefix(c.HeldBy, "PodDisruptionBudget: ")
		})
	})
	if now := evictions(eviction.Blocked); now <= blocked {
		t.Errorf("deckhand_restartschedule_pod_evictions_total{trigger=Memory,result=blocked} %v, was %v: the refusal not counted", now, blocked)
	}
	if err := env.Client.Delete(ctx, pdb); err != nil {
		t.Fatal(err)
	}
	evicted := waitEvicted(t, rs, deckhandv1alpha1.RestartTriggerMemory, 2*time.Minute)
	if evicted.Pod != leaking || evicted.Result != deckhandv1alpha1.RestartSucceeded {
		t.Fatalf("history entry %+v, want the leaking pod %s evicted", evicted, leaking)
	}
	if now := evictions(eviction.Evicted); now != evictedCount+1 {
		t.Errorf("deckhand_restartschedule_pod_evictions_total{trigger=Memory,result=success} %v, was %v: want the one eviction counted", now, evictedCount)
	}
	waitSchedule(t, rs, time.Minute, "MetricsUnavailable False once metrics-server serves", func(got *deckhandv1alpha1.RestartSchedule) bool {
		return meta.IsStatusConditionFalse(got.Status.Conditions, deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition)
	})
	onlyDeleted(t, watch, leaking)
}

// stopMetricsServer stops the cluster's metrics-server for the rest of t;
// it is started again when t ends if t has not, so that the next test has
// a metrics API.
func stopMetricsServer(t *testing.T) {
	t.Helper()
	if err := env.Cluster.StopMetricsServer(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := env.Cluster.StartMetricsServer(ctx); err != nil && !strings.Contains(err.Error(), "metrics-server is running") {
			t.Errorf("starting metrics-server again: %v", err)
		}
	})
}

// expectWarningEvent waits for a Warning Event of reason about the
// RestartSchedule name in namespace ns.
func expectWarningEvent(t *testing.T, ns, name, reason string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		var events corev1.EventList
		err := env.Client.List(ctx, &events, client.InNamespace(ns),
			client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("reason", reason)})
		return slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return e.Type == corev1.EventTypeWarning && e.InvolvedObject.Kind == "RestartSchedule" && e.InvolvedObject.Name == name
		}), err
	}, "a %s Warning Event about RestartSchedule %s", reason, name)
}

// counterValue is the value of the manager's counter name in the series
// with labels (0 when there is none).
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
