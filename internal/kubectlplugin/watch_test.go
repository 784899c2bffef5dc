package kubectlplugin

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TestJudge pins the order of status --watch's rules: an unobserved spec
// first, then failure, then Ready.
func TestJudge(t *testing.T) {
	c := func(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "m"}
	}
	ready, notReady := c(deckhandv1alpha1.ReadyCondition, metav1.ConditionTrue, "Complete"), c(deckhandv1alpha1.ReadyCondition, metav1.ConditionFalse, "RollingOut")
	cases := map[string]struct {
		observed int64
		conds    []metav1.Condition
		want     progress
		why      string
	}{
		"Ready True":                         {2, []metav1.Condition{ready}, done, "Ready True Complete: m"},
		"Ready False":                        {2, []metav1.Condition{notReady}, inProgress, "Ready False RollingOut: m"},
		"no Ready condition":                 {2, nil, inProgress, "no Ready condition yet"},
		"Ready True for an older generation": {1, []metav1.Condition{ready}, inProgress, "observe generation 2 (status is for generation 1)"},
		"Stalled True":                       {2, []metav1.Condition{notReady, c(deckhandv1alpha1.StalledCondition, metav1.ConditionTrue, "ReplicaFailure")}, failed, "Stalled True ReplicaFailure"},
		"Degraded True beats Ready True":     {2, []metav1.Condition{ready, c(deckhandv1alpha1.WebServerDegradedCondition, metav1.ConditionTrue, "ProbeFailing")}, failed, "Degraded True ProbeFailing"},
		"Degraded False":                     {2, []metav1.Condition{ready, c(deckhandv1alpha1.WebServerDegradedCondition, metav1.ConditionFalse, "AsExpected")}, done, "Ready True"},
		"progress deadline exceeded":         {2, []metav1.Condition{notReady, c(deckhandv1alpha1.PodSetProgressingCondition, metav1.ConditionFalse, progressDeadlineExceeded)}, failed, "Progressing False ProgressDeadlineExceeded"},
		"progressing":                        {2, []metav1.Condition{notReady, c(deckhandv1alpha1.PodSetProgressingCondition, metav1.ConditionTrue, "NewPodsRolling")}, inProgress, "Ready False"},
		"a failure of an older generation":   {1, []metav1.Condition{c(deckhandv1alpha1.StalledCondition, metav1.ConditionTrue, "ReplicaFailure")}, inProgress, "observe generation 2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := &deckhandv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
			ps.Status.ObservedGeneration, ps.Status.Conditions = tc.observed, tc.conds
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ps)
			if err != nil {
				t.Fatal(err)
			}
			got := judge(&unstructured.Unstructured{Object: m})
			if got.progress != tc.want || !strings.Contains(got.why, tc.why) {
				t.Errorf("judge = %v %q, want %v with %q", got.progress, got.why, tc.want, tc.why)
			}
		})
	}
}

func TestExitCode(t *testing.T) {
	for err, want := range map[error]int{
		nil:                 0,
		errors.New("other"): 1,
		fmt.Errorf("wrapped: %w", &ExitError{Code: ExitTimedOut, Err: errors.New("timed out")}): ExitTimedOut,
	} {
		if got := ExitCode(err); got != want {
			t.Errorf("ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}
