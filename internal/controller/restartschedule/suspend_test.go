package restartschedule_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// suspendMidRun starts a run over Deployments "a" and "b" (maxConcurrent 1),
// suspends the schedule "s" while "a" rolls out, and waits until that
// rollout has been followed to the end while suspended, with "b" still
// waiting. It returns the run's slot as the restarted-at value.
func suspendMidRun(t *testing.T, ns string, startingDeadlineSeconds int64) string {
	t.Helper()
	labels := map[string]string{"tier": "mid"}
	a := newDeployment(ns, "a", 1, labels, nil)
	// Long enough a rollout to suspend in the middle of it.
	a.Spec.MinReadySeconds = 4
	createRolledOut(t, a, newDeployment(ns, "b", 1, labels, nil))
	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "@every 5s", HistoryLimit: 50, MaxConcurrent: 1,
			StartingDeadlineSeconds: &startingDeadlineSeconds,
			// Longer than any clock advance of these tests.
			RolloutTimeout: &metav1.Duration{Duration: time.Hour},
			Target:         deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: labels}}},
	})

	var slot string
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		slot = getDeploy(t, ns, "a").Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]
		return slot != "", nil
	}, "the first run restarts Deployment a")
	patchRS(t, ns, "s", `{"spec":{"suspend":true}}`)
	waitRS(t, ns, "s", 30*time.Second, "the controller observes the suspension", func(rs *deckhandv1alpha1.RestartSchedule) bool {
		return rs.Status.ObservedGeneration == rs.Generation && meta.IsStatusConditionTrue(rs.Status.Conditions, deckhandv1alpha1.RestartScheduleSuspendedCondition)
	})
	if v := getDeploy(t, ns, "b").Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]; v != "" {
		t.Fatalf("precondition: Deployment b was restarted (%q) before the suspension took effect", v)
	}

	// The rollout that had started is followed to the end while suspended,
	// and the reconcile that records it does not start b.
	rs := waitHistory(t, ns, "s", "Succeeded for Deployment/a while suspended", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Workload == "Deployment/a" && formatRFC3339(h.ScheduledTime) == slot && h.Result == deckhandv1alpha1.RestartSucceeded
	})
	if !rs.Spec.Suspend {
		t.Fatalf("precondition: the schedule is no longer suspended")
	}
	if v := getDeploy(t, ns, "b").Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]; v != "" {
		t.Fatalf("Deployment b was restarted (%q) while the schedule was suspended", v)
	}
	if p := rs.Status.Pending; len(p) != 1 || p[0].Name != "b" || formatRFC3339(p[0].ScheduledTime) != slot {
		t.Fatalf("pending while suspended = %+v, want Deployment b of the run scheduled at %s", p, slot)
	}
	return slot
}

func formatRFC3339(t metav1.Time) string { return t.UTC().Format(time.RFC3339) }

// Resumed within startingDeadlineSeconds of its slot, a suspended run
// continues with the workloads it had not started.
func TestIntegrationSuspendMidRunResumedWithinDeadlineContinues(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	slot := suspendMidRun(t, ns, 3600)
	patchRS(t, ns, "s", `{"spec":{"suspend":false}}`)
	rs := waitHistory(t, ns, "s", "Succeeded for Deployment/b", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Workload == "Deployment/b" && formatRFC3339(h.ScheduledTime) == slot
	})
	for _, h := range rs.Status.History {
		if h.Workload == "Deployment/b" && formatRFC3339(h.ScheduledTime) == slot && h.Result != deckhandv1alpha1.RestartSucceeded {
			t.Fatalf("Deployment b of the resumed run: %+v, want Succeeded", h)
		}
	}
}

// Resumed more than startingDeadlineSeconds after its slot, a suspended run
// is not continued: the workloads it had not started are recorded as Missed
// (with a MissSchedule Event) and are not restarted for that slot.
func TestIntegrationSuspendMidRunResumedPastDeadlineIsNotContinued(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	slot := suspendMidRun(t, ns, 60)
	// Two minutes later: the run's slot is now older than the deadline.
	advanceClock(t, 2*time.Minute)
	patchRS(t, ns, "s", `{"spec":{"suspend":false}}`)

	var missed *deckhandv1alpha1.RestartRecord
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		if v := getDeploy(t, ns, "b").Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]; v == slot {
			return false, fmt.Errorf("Deployment b was restarted for the run scheduled at %s after resuming past its deadline", slot)
		}
		rs, err := getRS(ctx, ns, "s")
		if err != nil {
			return false, err
		}
		for _, h := range rs.Status.History {
			if h.Workload == "Deployment/b" && formatRFC3339(h.ScheduledTime) == slot {
				missed = &h
				return true, nil
			}
		}
		return false, nil
	}, "Deployment b of the run scheduled at %s is recorded", slot)
	if missed.Result != deckhandv1alpha1.RestartMissed {
		t.Fatalf("Deployment b of the run past its deadline: %+v, want Missed", *missed)
	}
	// The record and the removal from pending are one status write: b can
	// no longer be restarted for that slot (later runs use later slots).
	rs, err := getRS(ctx(t), ns, "s")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rs.Status.Pending {
		if formatRFC3339(p.ScheduledTime) == slot {
			t.Fatalf("the abandoned run is still pending: %+v", rs.Status.Pending)
		}
	}
	if v := getDeploy(t, ns, "b").Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]; v == slot {
		t.Fatalf("Deployment b was restarted for the abandoned run scheduled at %s", slot)
	}
	// A MissSchedule Warning Event tells that the run was not continued.
	waitWarningEvent(t, ns, "s", "MissSchedule")
}
