package podset

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TestOnlyCountsChanged: what moves with every pod event may wait; what a
// reader acts on may not.
func TestOnlyCountsChanged(t *testing.T) {
	base := func() *deckhandv1alpha1.PodSetStatus {
		return &deckhandv1alpha1.PodSetStatus{
			Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, FullyLabeledReplicas: 3, UpdatedReplicas: 3,
			PodNames: []string{"a", "b", "c"}, Selector: "app=web", CurrentRevision: "r1", UpdateRevision: "r1",
			LastProgressTime: &metav1.Time{Time: now}, ObservedGeneration: 2,
			Conditions: []metav1.Condition{{
				Type: deckhandv1alpha1.PodSetProgressingCondition, Status: metav1.ConditionTrue, Reason: ReasonScaling,
				Message: "3 of 5 pods", ObservedGeneration: 2, LastTransitionTime: metav1.Time{Time: now},
			}},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*deckhandv1alpha1.PodSetStatus)
		counts bool
	}{
		{"nothing", func(*deckhandv1alpha1.PodSetStatus) {}, true},
		{"replicas and names", func(st *deckhandv1alpha1.PodSetStatus) {
			st.Replicas, st.FullyLabeledReplicas, st.UpdatedReplicas = 4, 4, 4
			st.PodNames = append(st.PodNames, "d")
		}, true},
		{"ready and available", func(st *deckhandv1alpha1.PodSetStatus) { st.ReadyReplicas, st.AvailableReplicas = 3, 3 }, true},
		{"terminating", func(st *deckhandv1alpha1.PodSetStatus) { st.TerminatingReplicas = 1 }, true},
		{"progress time", func(st *deckhandv1alpha1.PodSetStatus) {
			st.LastProgressTime = &metav1.Time{Time: now.Add(time.Second)}
		}, true},
		{"condition message", func(st *deckhandv1alpha1.PodSetStatus) { st.Conditions[0].Message = "4 of 5 pods" }, true},
		{"observed generation", func(st *deckhandv1alpha1.PodSetStatus) { st.ObservedGeneration = 3 }, false},
		{"update revision", func(st *deckhandv1alpha1.PodSetStatus) { st.UpdateRevision = "r2" }, false},
		{"current revision", func(st *deckhandv1alpha1.PodSetStatus) { st.CurrentRevision = "r0" }, false},
		{"selector", func(st *deckhandv1alpha1.PodSetStatus) { st.Selector = "app=api" }, false},
		{"collision count", func(st *deckhandv1alpha1.PodSetStatus) { st.CollisionCount = ptr.To[int32](1) }, false},
		{"blocked pods", func(st *deckhandv1alpha1.PodSetStatus) { st.DisruptionBlockedPods = []string{"a"} }, false},
		{"condition status", func(st *deckhandv1alpha1.PodSetStatus) {
			st.Conditions[0].Status = metav1.ConditionFalse
			st.Conditions[0].LastTransitionTime = metav1.Time{Time: now.Add(time.Second)}
		}, false},
		{"condition reason", func(st *deckhandv1alpha1.PodSetStatus) { st.Conditions[0].Reason = ReasonComplete }, false},
		{"condition generation", func(st *deckhandv1alpha1.PodSetStatus) { st.Conditions[0].ObservedGeneration = 3 }, false},
		{"condition added", func(st *deckhandv1alpha1.PodSetStatus) {
			st.Conditions = append(st.Conditions, metav1.Condition{Type: deckhandv1alpha1.PodSetReplicaFailureCondition, Status: metav1.ConditionTrue})
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prev, next := base(), base()
			tc.change(next)
			if got := onlyCountsChanged(prev, next); got != tc.counts {
				t.Errorf("onlyCountsChanged = %t, want %t", got, tc.counts)
			}
			if prev.Conditions[0].Message != "3 of 5 pods" || prev.Replicas != 3 {
				t.Errorf("onlyCountsChanged changed its argument: %+v", prev)
			}
		})
	}
}

// TestStatusPacer: a counts-only write waits for the rest of the interval
// after this process's last write of the same PodSet, and never for a
// PodSet it has not written or that was replaced by one of the same name.
func TestStatusPacer(t *testing.T) {
	var p statusPacer
	if w := p.wait("ns/web", "u1", now); w != 0 {
		t.Errorf("never written: wait %s, want 0", w)
	}
	p.wrote("ns/web", "u1", now)
	if w := p.wait("ns/web", "u1", now.Add(300*time.Millisecond)); w != statusCountsInterval-300*time.Millisecond {
		t.Errorf("300ms after a write: wait %s, want %s", w, statusCountsInterval-300*time.Millisecond)
	}
	if w := p.wait("ns/web", "u1", now.Add(statusCountsInterval)); w != 0 {
		t.Errorf("an interval after a write: wait %s, want 0", w)
	}
	if w := p.wait("ns/web", "u2", now); w != 0 {
		t.Errorf("another PodSet of the same name: wait %s, want 0", w)
	}
	if w := p.wait("ns/api", "u1", now); w != 0 {
		t.Errorf("another PodSet: wait %s, want 0", w)
	}
	p.forget("ns/web")
	if w := p.wait("ns/web", "u1", now); w != 0 {
		t.Errorf("forgotten: wait %s, want 0", w)
	}
}
