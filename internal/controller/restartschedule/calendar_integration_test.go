package restartschedule_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	restartschedule "github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
)

// TestIntegrationBlackoutDate: slots on a blackout date are recorded as
// Skipped and restart nothing, the status points at the first slot after
// the blackout, a plain run-now is refused and one with the override
// restarts the workload once.
func TestIntegrationBlackoutDate(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	createRolledOut(t, newDeployment(ns, "web", 1, nil, nil))
	// Yesterday to tomorrow: a test running across midnight stays inside.
	now := testClock.Now().UTC()
	blackout := now.AddDate(0, 0, -1).Format(time.DateOnly) + "/" + now.AddDate(0, 0, 1).Format(time.DateOnly)
	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "frozen"},
		Spec:       deckhandv1alpha1.RestartScheduleSpec{Schedule: "@every 2s", Target: targetRef("web"), BlackoutDates: []string{blackout}},
	})
	rs := waitHistory(t, ns, "frozen", "a slot skipped for the blackout", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Result == deckhandv1alpha1.RestartSkipped && strings.Contains(h.Message, "is a blackout date")
	})
	if d := getDeploy(t, ns, "web"); d.Generation != 1 {
		t.Fatalf("the Deployment was restarted on a blackout date: generation %d, restarted-at %q", d.Generation, d.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation])
	}
	after := time.Date(now.Year(), now.Month(), now.Day()+2, 0, 0, 0, 0, time.UTC)
	if rs.Status.NextRunTime == nil || rs.Status.NextRunTime.Time.Before(after) || rs.Status.NextRunTime.After(after.Add(2*time.Second)) {
		t.Fatalf("nextRunTime %v, want the first slot after the blackout (%s)", rs.Status.NextRunTime, after)
	}

	runNow(t, ns, "frozen", "plain")
	waitHistory(t, ns, "frozen", "the plain run-now refused", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Trigger == deckhandv1alpha1.RestartTriggerRunNow && h.Result == deckhandv1alpha1.RestartSkipped && strings.Contains(h.Message, "blackout")
	})
	patchRS(t, ns, "frozen", `{"metadata":{"annotations":{"`+deckhandv1alpha1.RestartScheduleRunNowAnnotation+`":"hotfix","`+deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation+`":"hotfix"}}}`)
	waitHistory(t, ns, "frozen", "the overridden run-now Succeeded", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Trigger == deckhandv1alpha1.RestartTriggerRunNow && h.Result == deckhandv1alpha1.RestartSucceeded
	})
	if d := getDeploy(t, ns, "web"); d.Generation != 2 {
		t.Fatalf("the override restarted the Deployment %d times", d.Generation-1)
	}
	consistently(t, 3*time.Second, func(ctx context.Context) error {
		if d := getDeploy(t, ns, "web"); d.Generation != 2 {
			return fmt.Errorf("restarted again after the override: generation %d", d.Generation)
		}
		return nil
	})
}

// TestIntegrationWindowDefer: with a window that opens in ten minutes and
// outsideWindowPolicy Defer, slots are neither run nor recorded and the
// status names the opening; once the clock reaches the window, the
// workload restarts.
func TestIntegrationWindowDefer(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	createRolledOut(t, newDeployment(ns, "web", 1, nil, nil))
	open := testClock.Now().UTC().Add(10 * time.Minute).Truncate(time.Minute)
	window := deckhandv1alpha1.RestartWindow{Start: open.Format("15:04"), End: open.Add(30 * time.Minute).Format("15:04")}
	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "later"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "@every 2s", Target: targetRef("web"),
			Windows: []deckhandv1alpha1.RestartWindow{window}, OutsideWindowPolicy: deckhandv1alpha1.RestartOutsideWindowDefer},
	})
	waitRS(t, ns, "later", 30*time.Second, "nextRunTime is the window opening "+open.String(), func(rs *deckhandv1alpha1.RestartSchedule) bool {
		return rs.Status.NextRunTime != nil && rs.Status.NextRunTime.Time.Equal(open)
	})
	consistently(t, 5*time.Second, func(ctx context.Context) error {
		rs, err := getRS(ctx, ns, "later")
		if err != nil {
			return err
		}
		if d := getDeploy(t, ns, "web"); d.Generation != 1 || len(rs.Status.History) != 0 {
			return fmt.Errorf("before the window: generation %d, history %+v", d.Generation, rs.Status.History)
		}
		return nil
	})
	advanceClock(t, 10*time.Minute)
	rs := waitHistory(t, ns, "later", "a Succeeded run once the window opened", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Result == deckhandv1alpha1.RestartSucceeded
	})
	if st := rs.Status.History[0].StartTime; st == nil || st.Time.Before(open) {
		t.Fatalf("restarted at %v, before the window opened at %s", st, open)
	}
}

// TestIntegrationFailurePolicyStop: the first workload's rollout times out
// (its pods cannot be scheduled), so the run stops: the second workload is
// recorded as Skipped and never restarted, RunStopped is True and a
// RunStopped Warning Event is emitted.
func TestIntegrationFailurePolicyStop(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	labels := map[string]string{"tier": "chain"}
	broken := newDeployment(ns, "a-broken", 1, labels, nil)
	broken.Spec.Template.Spec.NodeSelector = map[string]string{"no-such-node": "true"}
	create(t, broken)
	createRolledOut(t, newDeployment(ns, "b-healthy", 1, labels, nil))
	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "chain"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "0 0 1 1 *", FailurePolicy: deckhandv1alpha1.RestartFailureStop,
			Target:         deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: labels}},
			RolloutTimeout: &metav1.Duration{Duration: 3 * time.Second}},
	})
	runNow(t, ns, "chain", "go")
	rs := waitHistory(t, ns, "chain", "Deployment/b-healthy skipped by the stop", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Workload == "Deployment/b-healthy" && h.Result == deckhandv1alpha1.RestartSkipped
	})
	if !strings.Contains(rs.Status.History[0].Message, "failurePolicy Stop") || rs.Status.History[1].Workload != "Deployment/a-broken" ||
		rs.Status.History[1].Result != deckhandv1alpha1.RestartFailed {
		t.Fatalf("history %+v", rs.Status.History)
	}
	if d := getDeploy(t, ns, "b-healthy"); d.Generation != 1 {
		t.Fatalf("the run went on after the failure: b-healthy at generation %d", d.Generation)
	}
	c := meta.FindStatusCondition(rs.Status.Conditions, deckhandv1alpha1.RestartScheduleRunStoppedCondition)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "Deployment/a-broken failed") {
		t.Fatalf("RunStopped %+v", c)
	}
	if r := meta.FindStatusCondition(rs.Status.Conditions, deckhandv1alpha1.ReadyCondition); r == nil || r.Reason != restartschedule.ReasonRunStopped {
		t.Fatalf("Ready %+v", r)
	}
	waitWarningEvent(t, ns, "chain", restartschedule.ReasonRunStopped)
}

// TestIntegrationJitter: with jitter, each workload is restarted no earlier
// than its derived delay after the run's time.
func TestIntegrationJitter(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	labels := map[string]string{"tier": "spread"}
	createRolledOut(t, newDeployment(ns, "a", 1, labels, nil), newDeployment(ns, "b", 1, labels, nil), newDeployment(ns, "c", 1, labels, nil))
	const bound = 6 * time.Second
	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "spread"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "0 0 1 1 *", MaxConcurrent: 3, Jitter: &metav1.Duration{Duration: bound},
			Target: deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: labels}}},
	})
	runNow(t, ns, "spread", "go")
	rs := waitRS(t, ns, "spread", 90*time.Second, "every workload restarted", func(rs *deckhandv1alpha1.RestartSchedule) bool {
		ok, _ := runNowRecords(rs)
		return ok == 3
	})
	for _, h := range rs.Status.History {
		delay := restartschedule.JitterDelay(rs.UID, h.Workload, h.ScheduledTime.Time, bound)
		// startTime is stored to the second.
		if earliest := h.ScheduledTime.Add(delay).Truncate(time.Second); h.StartTime == nil || h.StartTime.Time.Before(earliest) {
			t.Errorf("%s restarted at %v, before its jitter delay %s after %s", h.Workload, h.StartTime, delay, h.ScheduledTime.UTC().Format(time.RFC3339))
		}
	}
}
