package kubectlplugin

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TestStatusRestartSchedule prints a RestartSchedule's candidates with what
// holds each back, its newest runs and its conditions.
func TestStatusRestartSchedule(t *testing.T) {
	e, ctx := cluster(t)
	ns := e.Namespace(t)
	rs := newRestartSchedule(ctx, t, ns)
	since := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC))
	predicted := metav1.NewTime(since.Add(5 * time.Minute))
	rs.Status = deckhandv1alpha1.RestartScheduleStatus{ObservedGeneration: rs.Generation, CandidateCount: 2,
		Candidates: []deckhandv1alpha1.RestartCandidate{
			{Pod: "web-a", Workload: "Deployment/web", Trigger: deckhandv1alpha1.RestartTriggerMemory, Container: "app", Value: "930Mi (91%)", Limit: "90% of 1Gi", Since: &since,
				PredictedLimitAt: &predicted, PredictedLimit: "1Gi", Urgent: true},
			{Pod: "web-b", Workload: "Deployment/web", Trigger: deckhandv1alpha1.RestartTriggerMemory, Container: "app", Value: "950Mi (93%)", Limit: "90% of 1Gi", Since: &since, HeldBy: "maxConcurrent 1: web-a is being replaced"},
		},
		History: []deckhandv1alpha1.RestartRecord{{ScheduledTime: since, Trigger: deckhandv1alpha1.RestartTriggerMemory, Workload: "Deployment/web", Pod: "web-c",
			Result: deckhandv1alpha1.RestartSucceeded, Value: "960Mi (94%)"}},
		Conditions: []metav1.Condition{condition(deckhandv1alpha1.ReadyCondition, metav1.ConditionTrue, "Scheduled")},
	}
	if err := e.Client.Status().Update(ctx, rs); err != nil {
		t.Fatal(err)
	}
	out := kubectlDeckhand(ctx, t, "status", "rsched", rs.Name, "-n", ns)
	wantContains(t, out,
		"RestartSchedule: "+ns+"/"+rs.Name,
		"Schedule: 0 3 * * *",
		"Triggers: 0, naming 2 pod(s)",
		"web-a Deployment/web Memory app 930Mi (91%) 90% of 1Gi 2026-11-27T10:00:00Z 1Gi at 2026-11-27T10:05:00Z (",
		"ago), urgent being replaced",
		"web-b Deployment/web Memory app 950Mi (93%) 90% of 1Gi 2026-11-27T10:00:00Z - maxConcurrent 1: web-a is being replaced",
		"2026-11-27T10:00:00Z Memory Deployment/web pod web-c Succeeded 960Mi (94%)",
		"Ready True Scheduled",
	)
}
