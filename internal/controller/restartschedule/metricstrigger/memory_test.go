package metricstrigger_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// A two-pod Deployment on a fake node, both pods at 64Mi of a 256Mi limit;
// one of them then leaks 4Mi a second (its simulated working set grows
// with its age). A memory trigger at 50% of the limit, sustained for 45s,
// lists the leaking pod as held for 45s, evicts it once metrics-server has
// reported it above the threshold for 45s, leaves the flat one alone, and
// records the trigger and the value in history.
func TestIntegrationMemoryEvictsTheLeakingPod(t *testing.T) {
	t.Parallel()
	leak := startMemoryLeak(t, 4*time.Minute, "4Mi")
	rs := leak.schedule(t, "mem", memoryTrigger(50, 45*time.Second))
	expectLeakEvicted(t, rs, leakEviction{trigger: deckhandv1alpha1.RestartTriggerMemory, leaking: leak.leaking, flat: leak.flat, workload: "Deployment/web",
		leakStarted: leak.started, sustained: 45 * time.Second, threshold: "50% of 256Mi", above: "128Mi", timeout: 3 * time.Minute}, leak.watch)
}

// leakEviction is what a trigger on a leaking pod must do.
type leakEviction struct {
	trigger                 deckhandv1alpha1.RestartTrigger
	leaking, flat, workload string
	leakStarted             time.Time
	sustained, timeout      time.Duration
	// threshold is how history names the threshold; above is a quantity
	// the value history records must exceed.
	threshold, above string
}

// expectLeakEvicted checks that the schedule first lists the leaking pod as
// held for the trigger's `for`, then evicts it no earlier than `for` after
// the leak started, records the trigger, the pod, a value above the
// threshold and the threshold in history, is left with no candidate once
// the pod is replaced, and deletes no other pod.
func expectLeakEvicted(t *testing.T, rs *deckhandv1alpha1.RestartSchedule, want leakEviction, watch *testutil.DisruptionWatch) {
	t.Helper()
	waitHeld(t, rs, want.leaking, want.trigger, heldFor(want.sustained), 2*time.Minute)
	evicted := waitEvicted(t, rs, want.trigger, want.timeout)
	if evicted.Pod != want.leaking || evicted.Workload != want.workload || evicted.Result != deckhandv1alpha1.RestartSucceeded {
		t.Fatalf("history entry %+v, want the leaking pod %s evicted (flat: %s)", evicted, want.leaking, want.flat)
	}
	// The value is what the trigger saw, above the threshold.
	if v, err := resource.ParseQuantity(evicted.Value); err != nil || v.Cmp(resource.MustParse(want.above)) <= 0 {
		t.Fatalf("history value %q, want one above %s", evicted.Value, want.above)
	}
	// Sustained: no value before the leak started can be above the
	// threshold.
	if d := evicted.StartTime.Sub(want.leakStarted); d < want.sustained {
		t.Fatalf("evicted %s after the leak started, before its value could have been above the threshold for %s", d, want.sustained)
	}
	if !strings.Contains(evicted.Message, want.threshold) {
		t.Errorf("history message %q does not name the threshold %s", evicted.Message, want.threshold)
	}
	// The flat pod and the replacement stay: the replacement's values
	// below the threshold leave no candidate.
	waitSchedule(t, rs, 60*time.Second, "no candidate once the leaking pod is replaced", func(got *deckhandv1alpha1.RestartSchedule) bool {
		return got.Status.CandidateCount == 0
	})
	onlyDeleted(t, watch, want.leaking)
}

// waitEvicted waits for the schedule's first history entry of trigger and
// returns it.
func waitEvicted(t *testing.T, rs *deckhandv1alpha1.RestartSchedule, trigger deckhandv1alpha1.RestartTrigger, timeout time.Duration) deckhandv1alpha1.RestartRecord {
	t.Helper()
	var evicted deckhandv1alpha1.RestartRecord
	waitSchedule(t, rs, timeout, fmt.Sprintf("the %s trigger evicts a pod", trigger), func(got *deckhandv1alpha1.RestartSchedule) bool {
		i := slices.IndexFunc(got.Status.History, func(h deckhandv1alpha1.RestartRecord) bool { return h.Trigger == trigger })
		if i >= 0 {
			evicted = got.Status.History[i]
		}
		return i >= 0
	})
	return evicted
}

// onlyDeleted fails t unless pod is the only pod watch saw deleted.
func onlyDeleted(t *testing.T, watch *testutil.DisruptionWatch, pod string) {
	t.Helper()
	deleted, names := watch.Deleted()
	if len(deleted) != 1 || names[deleted[0]] != pod {
		var got []string
		for _, uid := range deleted {
			got = append(got, names[uid])
		}
		t.Fatalf("deleted %v, want only %s:\n%s", got, pod, watch.History())
	}
}

// The leaking pod of a memory leak grows 1Mi a second, under a schedule
// whose only window opens six hours from now: a memory trigger at 90% of
// the limit for 45s would hold it until the window. With
// urgency.predictedLimitWithin 10m, the trend of its working set (fitted
// over the last minute) reaches the 256Mi limit well within it: the pod is
// evicted now, outside the window, long before it crosses the threshold;
// the flat pod (no trend, no prediction) stays.
func TestIntegrationUrgencyEvictsThePodPredictedToReachItsLimit(t *testing.T) {
	t.Parallel()
	leak := startMemoryLeak(t, 4*time.Minute, "1Mi")
	rs := leak.predictionSchedule(t, "urgent", memoryTrigger(90, 45*time.Second), windowIn(6*time.Hour, time.Hour), true)
	expectPredictedEviction(t, rs, leak, deckhandv1alpha1.RestartTriggerMemory, "230Mi", "256Mi", true)
}

// The same leak in a window open since an hour ago that closes in two hours
// and opens again tomorrow, with no urgency: the pod is predicted to reach
// its limit within minutes, before the next window opens, so it is
// evicted now, under its threshold and before its `for` is over.
func TestIntegrationPredictionReplacesInTheWindowAPodThatWouldNotLastToTheNext(t *testing.T) {
	t.Parallel()
	leak := startMemoryLeak(t, 4*time.Minute, "1Mi")
	rs := leak.predictionSchedule(t, "window", memoryTrigger(90, 45*time.Second), windowIn(-time.Hour, 3*time.Hour), false)
	expectPredictedEviction(t, rs, leak, deckhandv1alpha1.RestartTriggerMemory, "230Mi", "256Mi", false)
}

// percentOfLimit on a container with no memory limit: the pod is never a
// candidate however much it uses, and MetricsUnavailable says which
// container lacks the limit.
func TestIntegrationMemoryPercentWithoutLimit(t *testing.T) {
	t.Parallel()
	needEnv(t)
	ctx := testutil.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	testutil.Create(ctx, t, env.Client, deployment(ns, "nolimit", 1, map[string]string{localcluster.SimMemoryWorkingSetAnnotation: "1Gi"}, nil))
	rs := podScope(ns, "mem", "nolimit", memoryTrigger(1, 0))
	testutil.Create(ctx, t, env.Client, rs)
	got := waitSchedule(t, rs, 2*time.Minute, "MetricsUnavailable names the container without a limit", func(got *deckhandv1alpha1.RestartSchedule) bool {
		c := meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "NoMemoryLimit" && strings.Contains(c.Message, "/app has no memory limit")
	})
	if len(got.Status.Candidates) > 0 || len(got.Status.History) > 0 {
		t.Fatalf("acted on a pod without a limit: candidates %+v, history %+v", got.Status.Candidates, got.Status.History)
	}
}
