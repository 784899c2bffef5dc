package restartschedule

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// A run of more workloads than status.pending lists restarts every one of
// them, once, in order, listing a hundred at a time and counting the rest:
// the next ones are listed when the listed ones have all started, whether
// the last started filled maxConcurrent (1) or left room (3).
func TestUnitLongRunListsAHundredAtATime(t *testing.T) {
	for _, limit := range []int32{1, 3} {
		t.Run(fmt.Sprintf("maxConcurrent %d", limit), func(t *testing.T) { longRun(t, limit) })
	}
}

func longRun(t *testing.T, limit int32) {
	const n = 250
	sel := map[string]string{"tier": "web"}
	rs := schedule("s", "0 * * * *", "2026-01-01T10:30:00Z", func(rs *deckhandv1alpha1.RestartSchedule) {
		rs.Spec.Target = deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: sel}}
		rs.Spec.MaxConcurrent = limit
	})
	objs := []client.Object{rs}
	for i := range n {
		objs = append(objs, deployment(fmt.Sprintf("d%03d", i), sel))
	}
	h := newHarness(t, "2026-01-01T11:00:01Z", objs...)
	h.reconcile("s")
	st := h.rs("s").Status
	if l := int(limit); len(st.Active) != l || len(st.Pending) != maxListedPending-l || int(st.PendingCount) != n-l || st.PendingAfter != "Deployment/d099" {
		t.Fatalf("run started with %d active, %d listed, pendingCount %d, pendingAfter %q; want %d, %d, %d, Deployment/d099",
			len(st.Active), len(st.Pending), st.PendingCount, st.PendingAfter, l, maxListedPending-l, n-l)
	}
	for step := 0; len(h.rs("s").Status.Active) > 0; step++ {
		if step > n {
			t.Fatal("the run does not end")
		}
		for _, a := range h.rs("s").Status.Active {
			h.rolledOut(a.Name)
		}
		h.reconcile("s")
		h.drainEvents() // the fake recorder holds 100
		if st := h.rs("s").Status; len(st.Pending) > maxListedPending || int(st.PendingCount) < len(st.Pending) {
			t.Fatalf("pending lists %d, pendingCount %d", len(st.Pending), st.PendingCount)
		}
	}
	for i := range n {
		if name := fmt.Sprintf("d%03d", i); h.restartedAt(name) != "2026-01-01T11:00:00Z" {
			t.Fatalf("%s was not restarted", name)
		}
	}
	if st := h.rs("s").Status; st.PendingCount != 0 || st.PendingAfter != "" {
		t.Fatalf("the run ended with pendingCount %d, pendingAfter %q", st.PendingCount, st.PendingAfter)
	}
}

// failurePolicy Stop ends the workloads not listed yet too, in one history
// entry, and says so in a message of bounded length.
func TestUnitLongRunStops(t *testing.T) {
	const n = 250
	sel := map[string]string{"tier": "web"}
	rs := schedule("s", "0 * * * *", "2026-01-01T10:30:00Z", func(rs *deckhandv1alpha1.RestartSchedule) {
		rs.Spec.Target = deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: sel}}
		rs.Spec.FailurePolicy = deckhandv1alpha1.RestartFailureStop
	})
	objs := []client.Object{rs}
	for i := range n {
		objs = append(objs, deployment(fmt.Sprintf("d%03d", i), sel))
	}
	h := newHarness(t, "2026-01-01T11:00:01Z", objs...)
	h.reconcile("s")
	if err := h.c.Delete(t.Context(), h.deploy("d000")); err != nil {
		t.Fatal(err)
	}
	h.reconcile("s")
	st := h.rs("s").Status
	if len(st.Pending) != 0 || st.PendingCount != 0 || st.PendingAfter != "" {
		t.Fatalf("a stopped run left %d listed, pendingCount %d, pendingAfter %q", len(st.Pending), st.PendingCount, st.PendingAfter)
	}
	c := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.RestartScheduleRunStoppedCondition)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "Deployment/d010 and 239 more") || len(c.Message) > maxMessage {
		t.Fatalf("RunStopped %+v; want it naming ten workloads and counting 239", c)
	}
	if got := st.History[0]; got.Workload != "" || got.Result != deckhandv1alpha1.RestartSkipped || !strings.HasPrefix(got.Message, "150 more workload(s)") {
		t.Fatalf("newest history entry %+v; want the 150 workloads not listed, Skipped", got)
	}
}

func TestTruncateMessage(t *testing.T) {
	for _, in := range []string{"", "short", strings.Repeat("é", 1000), strings.Repeat("x", maxMessage), strings.Repeat("x", maxMessage+1)} {
		got := truncateMessage(in)
		if len(got) > maxMessage || (len(in) <= maxMessage && got != in) || !strings.HasPrefix(in, strings.TrimSuffix(got, " [...]")) {
			t.Errorf("truncateMessage(%d bytes) = %d bytes %q...", len(in), len(got), got[:min(len(got), 20)])
		}
	}
}
