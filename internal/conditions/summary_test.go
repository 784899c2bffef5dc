package conditions_test

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/conditions"
)

// TestSetWritesOneSummary walks an object through every state and checks
// the summary conditions at each step: Ready always present with the
// verdict's generation, Reconciling and Stalled present only while True and
// never together, and a transition time that moves only when a status does.
func TestSetWritesOneSummary(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	other := metav1.Condition{Type: "Available", Status: metav1.ConditionTrue, Reason: "AsExpected", LastTransitionTime: metav1.NewTime(t0)}
	conds := []metav1.Condition{other}

	steps := []struct {
		summary          conditions.Summary
		generation       int64
		ready            metav1.ConditionStatus
		reconciling      bool
		stalled          bool
		readyTransitions bool
	}{
		{conditions.Summary{State: conditions.Reconciling, Reason: "RolloutInProgress", Message: "1 of 3 updated"}, 1, metav1.ConditionFalse, true, false, true},
		{conditions.Summary{State: conditions.Stalled, Reason: "ReplicaFailure", Message: "quota"}, 1, metav1.ConditionFalse, false, true, false},
		{conditions.Summary{State: conditions.Waiting, Reason: "PodsNotReady", Message: "2 of 3 ready"}, 2, metav1.ConditionFalse, false, false, false},
		{conditions.Summary{State: conditions.Ready, Reason: "Ready", Message: "3 of 3 ready"}, 2, metav1.ConditionTrue, false, false, true},
		{conditions.Summary{State: conditions.Ready, Reason: "Ready", Message: "still"}, 3, metav1.ConditionTrue, false, false, false},
	}
	var readySince metav1.Time
	for i, step := range steps {
		now := t0.Add(time.Duration(i+1) * time.Minute)
		conditions.Set(&conds, step.generation, now, step.summary)

		ready := meta.FindStatusCondition(conds, deckhandv1alpha1.ReadyCondition)
		if ready == nil || ready.Status != step.ready || ready.Reason != step.summary.Reason ||
			ready.Message != step.summary.Message || ready.ObservedGeneration != step.generation {
			t.Fatalf("step %d: Ready = %+v, want %s/%s for generation %d", i, ready, step.ready, step.summary.Reason, step.generation)
		}
		if step.readyTransitions {
			readySince = metav1.NewTime(now)
		}
		if !ready.LastTransitionTime.Equal(&readySince) {
			t.Errorf("step %d: Ready lastTransitionTime = %v, want %v", i, ready.LastTransitionTime, readySince)
		}
		for typ, want := range map[string]bool{deckhandv1alpha1.ReconcilingCondition: step.reconciling, deckhandv1alpha1.StalledCondition: step.stalled} {
			c := meta.FindStatusCondition(conds, typ)
			switch {
			case want && (c == nil || c.Status != metav1.ConditionTrue || c.Reason != step.summary.Reason || c.ObservedGeneration != step.generation):
				t.Errorf("step %d: %s = %+v, want True/%s", i, typ, c, step.summary.Reason)
			case !want && c != nil:
				t.Errorf("step %d: %s = %+v, want it absent", i, typ, c)
			}
		}
		if got := meta.FindStatusCondition(conds, other.Type); got == nil || *got != other {
			t.Errorf("step %d: the kind's own condition changed: %+v", i, got)
		}
	}
}
