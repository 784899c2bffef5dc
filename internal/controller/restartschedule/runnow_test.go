package restartschedule

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// runNow sets the run-now token of the schedule "s".
func (h *harness) runNow(token string) {
	h.t.Helper()
	rs := h.rs("s")
	orig := rs.DeepCopy()
	metav1.SetMetaDataAnnotation(&rs.ObjectMeta, deckhandv1alpha1.RestartScheduleRunNowAnnotation, token)
	if err := h.c.Patch(context.Background(), rs, client.MergeFrom(orig)); err != nil {
		h.t.Fatal(err)
	}
}

// runNowAndReconcile sets the run-now token of "s", reconciles it and
// returns the restarted-at value of the Deployment web and the schedule's
// status.
func (h *harness) runNowAndReconcile(token string) (string, deckhandv1alpha1.RestartScheduleStatus) {
	h.t.Helper()
	h.runNow(token)
	h.reconcile("s")
	return h.restartedAt("web"), h.rs("s").Status
}

// A run-now token starts one run at once, recorded with trigger RunNow and
// restarted-at set to the run's start time; the same token again does
// nothing, a new one runs again.
func TestUnitRunNow(t *testing.T) {
	h := newHarness(t, "2026-01-01T10:40:00.5Z", schedule("s", "0 * * * *", "2026-01-01T10:30:00Z"), deployment("web", nil))
	h.reconcile("s")
	h.drainEvents()

	got, st := h.runNowAndReconcile("first")
	if got != "2026-01-01T10:40:00Z" {
		t.Fatalf("restarted-at %q after run-now, want the run's start time", got)
	}
	if st.LastRunNowToken != "first" || len(st.Active) != 1 || st.Active[0].Trigger != deckhandv1alpha1.RestartTriggerRunNow {
		t.Fatalf("after run-now: token %q, active %+v", st.LastRunNowToken, st.Active)
	}
	if evs := h.drainEvents(); !hasEvent(evs, ReasonRunStarted) || !hasEvent(evs, "run-now run started at 2026-01-01T10:40:00Z") {
		t.Fatalf("events %v", evs)
	}
	h.rolledOut("web")
	h.set("2026-01-01T10:41:00Z")
	h.reconcile("s")
	st = h.rs("s").Status
	if len(st.History) != 1 || st.History[0].Result != deckhandv1alpha1.RestartSucceeded || st.History[0].Trigger != deckhandv1alpha1.RestartTriggerRunNow {
		t.Fatalf("history %+v", st.History)
	}

	// The same token again, on a new reconcile: nothing.
	rv := h.deploy("web").ResourceVersion
	h.set("2026-01-01T10:42:00Z")
	h.reconcile("s")
	if h.deploy("web").ResourceVersion != rv || len(h.rs("s").Status.History) != 1 {
		t.Fatalf("a handled token ran again: %v", results(h.rs("s")))
	}

	if got, _ := h.runNowAndReconcile("second"); got != "2026-01-01T10:42:00Z" {
		t.Fatalf("restarted-at %q after a new token", got)
	}
}

// A crash after the run-now patch and before the status write that records
// it: the retry, by a new process, finds the start time in pending and the
// workload already at it, and adopts the rollout without patching again.
func TestUnitRunNowCrashAfterPatch(t *testing.T) {
	h := newHarness(t, "2026-01-01T10:40:00Z", schedule("s", "0 * * * *", "2026-01-01T10:30:00Z"), deployment("web", nil))
	h.reconcile("s")
	h.runNow("t1")
	// Queues the run and writes the token and start time; patches nothing.
	h.reconcileOnce("s")
	if got := h.restartedAt("web"); got != "" {
		t.Fatalf("patched before the start time was recorded: %q", got)
	}
	if st := h.rs("s").Status; st.LastRunNowToken != "t1" || len(st.Pending) != 1 {
		t.Fatalf("not recorded before the patch: %+v", st)
	}
	// Later (the clock moved on), the patch, then a crash before the status.
	h.set("2026-01-01T10:40:07Z")
	h.reconcileOnce("s")
	if got := h.restartedAt("web"); got != "2026-01-01T10:40:00Z" {
		t.Fatalf("restarted-at %q", got)
	}
	h.r = &Reconciler{Client: h.c, Clock: h.clock, Recorder: h.events}
	rv := h.deploy("web").ResourceVersion
	h.set("2026-01-01T10:40:09Z")
	h.reconcile("s")
	if h.deploy("web").ResourceVersion != rv {
		t.Fatalf("the retry restarted again: restarted-at %q", h.restartedAt("web"))
	}
	if st := h.rs("s").Status; len(st.Active) != 1 || len(st.Pending) != 0 {
		t.Fatalf("not following the adopted rollout: %+v", st)
	}
}

// Suspended: refused with a Warning, the token recorded as handled so that
// resuming does not run it. Forbid with a run active: skipped and recorded.
func TestUnitRunNowSuspendedAndForbid(t *testing.T) {
	h := newHarness(t, "2026-01-01T10:40:00Z", schedule("s", "0 * * * *", "2026-01-01T10:30:00Z", func(rs *deckhandv1alpha1.RestartSchedule) {
		rs.Spec.Suspend = true
	}), deployment("web", nil))
	h.reconcile("s")
	got, st := h.runNowAndReconcile("while-suspended")
	if got != "" {
		t.Fatalf("suspended schedule restarted: %q", got)
	}
	if st.LastRunNowToken != "while-suspended" || len(st.History) != 1 || st.History[0].Result != deckhandv1alpha1.RestartSkipped {
		t.Fatalf("suspended run-now: %+v", st)
	}
	if evs := h.drainEvents(); !hasEvent(evs, "Warning "+ReasonRunNowRefused) {
		t.Fatalf("events %v", evs)
	}
	rs := h.rs("s")
	orig := rs.DeepCopy()
	rs.Spec.Suspend = false
	rs.Generation++
	if err := h.c.Patch(context.Background(), rs, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	h.set("2026-01-01T10:41:00Z")
	h.reconcile("s")
	if got := h.restartedAt("web"); got != "" {
		t.Fatalf("a refused token ran on resume: %q", got)
	}

	h.runNowAndReconcile("a")
	h.rollingOut("web")
	h.set("2026-01-01T10:42:00Z")
	if got, st = h.runNowAndReconcile("b"); got != "2026-01-01T10:41:00Z" {
		t.Fatalf("Forbid: restarted-at %q, want the first run's", got)
	}
	if st.LastRunNowToken != "b" || st.History[0].Result != deckhandv1alpha1.RestartSkipped || st.History[0].Trigger != deckhandv1alpha1.RestartTriggerRunNow {
		t.Fatalf("Forbid: token %q, history %+v", st.LastRunNowToken, st.History)
	}
}
