package restartschedule_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// runNowRecords counts the Succeeded and Skipped run-now entries of the
// history.
func runNowRecords(rs *deckhandv1alpha1.RestartSchedule) (succeeded, skipped int) {
	for _, h := range rs.Status.History {
		if h.Trigger != deckhandv1alpha1.RestartTriggerRunNow {
			continue
		}
		switch h.Result {
		case deckhandv1alpha1.RestartSucceeded:
			succeeded++
		case deckhandv1alpha1.RestartSkipped:
			skipped++
		}
	}
	return succeeded, skipped
}

// TestIntegrationRunNow: an annotation change alone (no new generation)
// wakes the controller; each new token restarts the workload once, with
// restarted-at set to the run's start time; a token sent while suspended
// is refused and recorded.
func TestIntegrationRunNow(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	createRolledOut(t, newDeployment(ns, "web", 1, nil, nil))
	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "yearly"},
		// Never due while the test runs.
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "0 0 1 1 *", Target: targetRef("web")},
	})

	runNow(t, ns, "yearly", "t1")
	rs := waitHistory(t, ns, "yearly", "a Succeeded run-now restart", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Result == deckhandv1alpha1.RestartSucceeded && h.Trigger == deckhandv1alpha1.RestartTriggerRunNow
	})
	first := rs.Status.History[0]
	if got := getDeploy(t, ns, "web").Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]; got != first.ScheduledTime.UTC().Format(time.RFC3339) {
		t.Fatalf("restarted-at %q, want the run's start time %s", got, first.ScheduledTime.UTC().Format(time.RFC3339))
	}
	if rs.Status.LastRunNowToken != "t1" {
		t.Fatalf("lastRunNowToken %q", rs.Status.LastRunNowToken)
	}
	waitRolledOut(t, ns, "web")

	runNow(t, ns, "yearly", "t2")
	waitRS(t, ns, "yearly", 90*time.Second, "a second token runs a second time", func(rs *deckhandv1alpha1.RestartSchedule) bool {
		ok, _ := runNowRecords(rs)
		return ok == 2
	})

	patchRS(t, ns, "yearly", `{"spec":{"suspend":true},"metadata":{"annotations":{"`+deckhandv1alpha1.RestartScheduleRunNowAnnotation+`":"t3"}}}`)
	rs = waitHistory(t, ns, "yearly", "a refused run-now", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Result == deckhandv1alpha1.RestartSkipped && h.Trigger == deckhandv1alpha1.RestartTriggerRunNow
	})
	if ok, _ := runNowRecords(rs); ok != 2 || rs.Status.LastRunNowToken != "t3" || len(rs.Status.Active)+len(rs.Status.Pending) != 0 {
		t.Fatalf("suspended run-now: %d runs, token %q, active %v, pending %v", ok, rs.Status.LastRunNowToken, rs.Status.Active, rs.Status.Pending)
	}
}

// TestIntegrationRunNowOnAnnotatedWorkload: the run-now annotation on a
// workload with the restart-schedule annotation is copied to its generated
// RestartSchedule, which runs it.
func TestIntegrationRunNowOnAnnotatedWorkload(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	createRolledOut(t, newDeployment(ns, "api", 1, nil, map[string]string{deckhandv1alpha1.RestartScheduleAnnotation: "0 0 1 1 *"}))
	waitGenerated(t, ns, "api-deployment")
	patchDeploy(t, ns, "api", `{"metadata":{"annotations":{"`+deckhandv1alpha1.RestartScheduleRunNowAnnotation+`":"w1"}}}`)
	rs := waitHistory(t, ns, "api-deployment", "a Succeeded run-now restart", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Result == deckhandv1alpha1.RestartSucceeded && h.Trigger == deckhandv1alpha1.RestartTriggerRunNow && h.Workload == "Deployment/api"
	})
	if rs.Annotations[deckhandv1alpha1.RestartScheduleRunNowAnnotation] != "w1" || rs.Status.LastRunNowToken != "w1" {
		t.Fatalf("generated schedule: annotation %q, lastRunNowToken %q", rs.Annotations[deckhandv1alpha1.RestartScheduleRunNowAnnotation], rs.Status.LastRunNowToken)
	}
}
