package metricstrigger_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	restartschedule "github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// metrics-server stops while a pod leaks past a memory trigger's threshold,
// its `for` already counting. Deckhand acts on no sample it can no longer
// refresh: past the moment the last samples would have had the pod evicted,
// nothing is evicted, MetricsUnavailable is True with MetricsAPIUnavailable,
// a Warning Event says so and the data-missing metric counts it. Once
// metrics-server serves again, the leaking pod is replaced and the flat one
// is left alone.
func TestIntegrationMemoryMetricsServerStopped(t *testing.T) {
	needEnv(t)
	ctx := testutil.Context(t, 6*time.Minute)
	ns := env.Namespace(t)
	d := deployment(ns, "web", 2, map[string]string{localcluster.SimMemoryWorkingSetAnnotation: "64Mi"},
		corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")})
	testutil.Create(ctx, t, env.Client, d)
	pods := readyPods(t, d, 2)
	leaking := pods[0].Name
	watch, _ := startLeak(ctx, t, d, pods, localcluster.SimMemoryLeakPerSecondAnnotation, "4Mi")

	const sustained = 30 * time.Second
	rs := podScope(ns, "mem", "web", deckhandv1alpha1.RestartNeedTrigger{Memory: &deckhandv1alpha1.RestartMemoryTrigger{
		Container: "app", PercentOfLimit: ptr.To[int32](50), For: &metav1.Duration{Duration: sustained}}})
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

	if err := env.Cluster.StartMetricsServer(ctx); err != nil {
		t.Fatal(err)
	}
	evicted := waitEvicted(t, rs, deckhandv1alpha1.RestartTriggerMemory, 3*time.Minute)
	if evicted.Pod != leaking || evicted.Result != deckhandv1alpha1.RestartSucceeded {
		t.Fatalf("history entry %+v, want the leaking pod %s evicted", evicted, leaking)
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
