package metricstrigger_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// A two-pod Deployment at 64Mi of a 256Mi limit, one pod then leaking 1Mi a
// second, under a schedule whose only window opens six hours from now: a
// memory trigger at 90% of the limit for 45s would hold the leaking pod
// until the window. With urgency.predictedLimitWithin 10m, the trend of
// its working set (fitted over the last minute) reaches 256Mi well within
// it: the pod is evicted now, outside the window, long before it crosses
// the threshold; history records the prediction, an UrgentRestart Event
// says why, and the flat pod (no trend, no prediction) stays.
func TestIntegrationUrgencyEvictsThePodPredictedToReachItsLimit(t *testing.T) {
	needEnv(t)
	ctx := testutil.Context(t, 4*time.Minute)
	ns := env.Namespace(t)
	d := deployment(ns, "web", 2, map[string]string{localcluster.SimMemoryWorkingSetAnnotation: "64Mi"},
		corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")})
	testutil.Create(ctx, t, env.Client, d)
	pods := readyPods(t, d, 2)
	leaking := pods[0].Name
	watch, _ := startLeak(ctx, t, d, pods, localcluster.SimMemoryLeakPerSecondAnnotation, "1Mi")

	rs := podScope(ns, "urgent", "web", deckhandv1alpha1.RestartNeedTrigger{Memory: &deckhandv1alpha1.RestartMemoryTrigger{
		Container: "app", PercentOfLimit: ptr.To[int32](90), For: &metav1.Duration{Duration: 45 * time.Second}}})
	opens := time.Now().UTC().Add(6 * time.Hour)
	rs.Spec.Windows = []deckhandv1alpha1.RestartWindow{{Start: opens.Format("15:04"), End: opens.Add(time.Hour).Format("15:04")}}
	rs.Spec.Urgency = &deckhandv1alpha1.RestartUrgency{PredictedLimitWithin: metav1.Duration{Duration: 10 * time.Minute}}
	testutil.Create(ctx, t, env.Client, rs)

	evicted := waitEvicted(t, rs, deckhandv1alpha1.RestartTriggerMemory, 3*time.Minute)
	if evicted.Pod != leaking || evicted.Result != deckhandv1alpha1.RestartSucceeded {
		t.Fatalf("history entry %+v, want the leaking pod %s evicted", evicted, leaking)
	}
	// Evicted for its prediction, not its threshold: its working set was
	// still under 90% of the limit.
	if v, err := resource.ParseQuantity(evicted.Value); err != nil || v.Cmp(resource.MustParse("230Mi")) >= 0 {
		t.Fatalf("history value %q, want one under the threshold (230Mi)", evicted.Value)
	}
	if p := evicted.PredictedLimitAt; p == nil || p.After(evicted.StartTime.Add(10*time.Minute)) {
		t.Fatalf("history records the prediction %v, want one within 10m of the eviction at %s", p, evicted.StartTime)
	}
	if !strings.Contains(evicted.Message, "predicted to reach 256Mi at ") || !strings.Contains(evicted.Message, "within spec.urgency.predictedLimitWithin") {
		t.Errorf("history message %q does not give the prediction", evicted.Message)
	}
	testutil.WaitEvent(t, env.Client, ns, 30*time.Second, "an UrgentRestart Event naming the pod and the closed window", func(e eventsv1.Event) bool {
		return e.Reason == "UrgentRestart" && e.Regarding.Name == rs.Name &&
			strings.Contains(e.Note, leaking) && strings.Contains(e.Note, "outside every maintenance window")
	})
	// The flat pod is never named, once the leaking pod's replacement
	// runs either.
	readyPods(t, d, 2)
	waitSchedule(t, rs, 60*time.Second, "no candidate once the leaking pod is replaced", func(got *deckhandv1alpha1.RestartSchedule) bool {
		return got.Status.CandidateCount == 0
	})
	onlyDeleted(t, watch, leaking)
}
