package restartschedule

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

func withWindows(windows ...deckhandv1alpha1.RestartWindow) func(*deckhandv1alpha1.RestartSchedule) {
	return func(rs *deckhandv1alpha1.RestartSchedule) { rs.Spec.Windows = windows }
}

func withBlackouts(dates ...string) func(*deckhandv1alpha1.RestartSchedule) {
	return func(rs *deckhandv1alpha1.RestartSchedule) { rs.Spec.BlackoutDates = dates }
}

func deferred(deadline int64) func(*deckhandv1alpha1.RestartSchedule) {
	return func(rs *deckhandv1alpha1.RestartSchedule) {
		rs.Spec.OutsideWindowPolicy = deckhandv1alpha1.RestartOutsideWindowDefer
		if deadline > 0 {
			rs.Spec.StartingDeadlineSeconds = ptr.To(deadline)
		}
	}
}

func calendarSkips(rs *deckhandv1alpha1.RestartSchedule) []deckhandv1alpha1.RestartRecord {
	var out []deckhandv1alpha1.RestartRecord
	for _, h := range rs.Status.History {
		if h.Result == deckhandv1alpha1.RestartSkipped && strings.HasPrefix(h.Message, calendarSkipPrefix) {
			out = append(out, h)
		}
	}
	return out
}

func wantTime(t *testing.T, what string, got *metav1.Time, want string) {
	t.Helper()
	if want == "" {
		if got != nil {
			t.Fatalf("%s = %s, want unset", what, got.UTC().Format(time.RFC3339))
		}
		return
	}
	if got == nil || !got.Equal(ptr.To(metav1.NewTime(testutil.Time(t, want)))) {
		t.Fatalf("%s = %v, want %s", what, got, want)
	}
}

// Skip: a slot outside the window is recorded as Skipped (consecutive ones
// folded into one entry) and restarts nothing; a slot inside it runs; the
// status shows the next slot that will really run.
func TestUnitWindowSkip(t *testing.T) {
	h := newHarness(t, "2026-01-01T00:30:00Z", schedule("s", "0 * * * *", "2026-01-01T00:30:00Z",
		withWindows(deckhandv1alpha1.RestartWindow{Start: "02:00", End: "03:00"})), deployment("web", nil))
	h.reconcile("s")
	rs := h.rs("s")
	wantTime(t, "nextScheduleTime", rs.Status.NextScheduleTime, "2026-01-01T01:00:00Z")
	wantTime(t, "nextRunTime", rs.Status.NextRunTime, "2026-01-01T02:00:00Z")
	wantTime(t, "nextRunScheduledTime", rs.Status.NextRunScheduledTime, "2026-01-01T02:00:00Z")

	h.wantRestartAt("2026-01-01T01:00:00.1Z", "web", "", "a slot outside the window")
	if skips := calendarSkips(h.rs("s")); len(skips) != 1 || !strings.Contains(skips[0].Message, "outside every maintenance window (02:00-03:00)") {
		t.Fatalf("calendar skips %+v", skips)
	}
	if !hasEvent(h.drainEvents(), "RunSkipped") {
		t.Fatal("no RunSkipped event for the first skipped slot")
	}
	h.wantRestartAt("2026-01-01T02:00:00.1Z", "web", "2026-01-01T02:00:00Z", "the slot in the window")
	h.rolledOut("web")
	h.set("2026-01-01T02:01:00Z")
	h.reconcile("s")
	rs = h.rs("s")
	wantTime(t, "nextRunTime after the run", rs.Status.NextRunTime, "2026-01-02T02:00:00Z")
	h.drainEvents()

	for _, now := range []string{"2026-01-01T03:00:00.1Z", "2026-01-01T04:00:00.1Z", "2026-01-01T05:00:00.1Z"} {
		h.wantRestartAt(now, "web", "2026-01-01T02:00:00Z", "slots after the window closed")
	}
	rs = h.rs("s")
	skips := calendarSkips(rs)
	if len(skips) != 2 || !skips[0].ScheduledTime.Equal(ptr.To(metav1.NewTime(testutil.Time(t, "2026-01-01T05:00:00Z")))) {
		t.Fatalf("consecutive skips not folded into the newest: %v", results(rs))
	}
	if evs := h.drainEvents(); len(evs) > 1 || (len(evs) == 1 && !strings.Contains(evs[0], "03:00:00Z")) {
		t.Fatalf("events for folded skips: %v", evs)
	}
}

// A blackout date stops the slot of that date whatever the windows; the
// next real run is the day after.
func TestUnitBlackoutDate(t *testing.T) {
	h := newHarness(t, "2026-01-01T00:00:00Z", schedule("s", "0 3 * * *", "2026-01-01T00:00:00Z",
		withBlackouts("2026-01-02", "2026-01-04/2026-01-05")), deployment("web", nil))
	h.wantRestartAt("2026-01-01T03:00:00.1Z", "web", "2026-01-01T03:00:00Z", "the day before the blackout")
	h.rolledOut("web")
	h.wantRestartAt("2026-01-02T03:00:00.1Z", "web", "2026-01-01T03:00:00Z", "the blackout date")
	rs := h.rs("s")
	if skips := calendarSkips(rs); len(skips) != 1 || !strings.Contains(skips[0].Message, `2026-01-02 is a blackout date (blackoutDates "2026-01-02")`) {
		t.Fatalf("history %v", results(rs))
	}
	wantTime(t, "nextRunTime", rs.Status.NextRunTime, "2026-01-03T03:00:00Z")
	h.wantRestartAt("2026-01-03T03:00:00.1Z", "web", "2026-01-03T03:00:00Z", "the day after")
	h.rolledOut("web")
	h.set("2026-01-03T03:01:00Z")
	h.reconcile("s")
	wantTime(t, "nextRunTime over a range", h.rs("s").Status.NextRunTime, "2026-01-06T03:00:00Z")
}

// Defer: a slot outside the window waits for the next opening within
// startingDeadlineSeconds, then restarts with the slot's time; beyond the
// deadline it is skipped.
func TestUnitWindowDefer(t *testing.T) {
	win := withWindows(deckhandv1alpha1.RestartWindow{Start: "02:00", End: "04:00"})
	h := newHarness(t, "2026-01-01T00:00:00Z", schedule("s", "0 5 * * *", "2026-01-01T00:00:00Z", win, deferred(24*3600)), deployment("web", nil))
	h.set("2026-01-01T05:00:00.1Z")
	res := h.reconcile("s")
	if got := h.restartedAt("web"); got != "" {
		t.Fatalf("restarted outside the window: %q", got)
	}
	rs := h.rs("s")
	if len(rs.Status.History) != 0 || len(rs.Status.Pending) != 0 {
		t.Fatalf("a deferred slot is neither recorded nor queued: %+v", rs.Status)
	}
	wantTime(t, "nextRunTime", rs.Status.NextRunTime, "2026-01-02T02:00:00Z")
	wantTime(t, "nextRunScheduledTime", rs.Status.NextRunScheduledTime, "2026-01-01T05:00:00Z")
	if want := 21*time.Hour - 100*time.Millisecond + requeueDelay; res.RequeueAfter != want {
		t.Fatalf("requeue after %s, want %s (the window opening)", res.RequeueAfter, want)
	}
	h.wantRestartAt("2026-01-02T02:00:00.1Z", "web", "2026-01-01T05:00:00Z", "the window opening")

	h2 := newHarness(t, "2026-01-01T00:00:00Z", schedule("s", "0 5 * * *", "2026-01-01T00:00:00Z", win, deferred(3600)), deployment("web", nil))
	h2.wantRestartAt("2026-01-01T05:00:00.1Z", "web", "", "an opening beyond the deadline")
	if skips := calendarSkips(h2.rs("s")); len(skips) != 1 || !strings.Contains(skips[0].Message, "more than startingDeadlineSeconds") {
		t.Fatalf("history %v", results(h2.rs("s")))
	}
}

// A run-now outside the windows is refused under Skip, and runs with the
// override naming its token.
func TestUnitRunNowHonoursWindows(t *testing.T) {
	h := newHarness(t, "2026-01-01T10:00:00Z", schedule("s", "0 3 * * *", "2026-01-01T09:00:00Z", withBlackouts("2026-01-01")), deployment("web", nil))
	got, st := h.runNowAndReconcile("t1")
	if got != "" || st.LastRunNowToken != "t1" || len(st.History) != 1 || st.History[0].Result != deckhandv1alpha1.RestartSkipped ||
		!strings.Contains(st.History[0].Message, "blackout date") {
		t.Fatalf("run-now on a blackout date: restarted-at %q, status %+v", got, st)
	}
	if !hasEvent(h.drainEvents(), ReasonRunNowRefused) {
		t.Fatal("no RunNowRefused event")
	}
	// An override naming another token does not apply.
	rs := h.rs("s")
	metav1.SetMetaDataAnnotation(&rs.ObjectMeta, deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation, "t1")
	if err := h.c.Update(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.runNowAndReconcile("t2"); got != "" {
		t.Fatalf("a stale override let run-now t2 through: %q", got)
	}
	rs = h.rs("s")
	metav1.SetMetaDataAnnotation(&rs.ObjectMeta, deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation, "t3")
	if err := h.c.Update(context.Background(), rs); err != nil {
		t.Fatal(err)
	}
	if got, st := h.runNowAndReconcile("t3"); got != "2026-01-01T10:00:00Z" || len(st.Active) != 1 {
		t.Fatalf("run-now with the override: restarted-at %q, status %+v", got, st)
	}
}

// Jitter delays each workload by its derived delay, and only by it.
func TestUnitJitter(t *testing.T) {
	sel := func(rs *deckhandv1alpha1.RestartSchedule) {
		rs.UID = types.UID("0b0e1a4c-uid")
		rs.Spec.Target = deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}}}
		rs.Spec.MaxConcurrent = 2
		rs.Spec.Jitter = &metav1.Duration{Duration: 10 * time.Minute}
	}
	labels := map[string]string{"tier": "web"}
	h := newHarness(t, "2026-01-01T00:00:00Z", schedule("s", "0 3 * * *", "2026-01-01T00:00:00Z", sel), deployment("a", labels), deployment("b", labels))
	slot := testutil.Time(t, "2026-01-01T03:00:00Z")
	da := jitterDelay("0b0e1a4c-uid", "Deployment/a", slot, 10*time.Minute)
	db := jitterDelay("0b0e1a4c-uid", "Deployment/b", slot, 10*time.Minute)
	if da == db {
		t.Fatalf("both workloads got the same delay %s", da)
	}
	first, second, dFirst, dSecond := "a", "b", da, db
	if db < da {
		first, second, dFirst, dSecond = "b", "a", db, da
	}
	h.set("2026-01-01T03:00:00.1Z")
	res := h.reconcile("s")
	if h.restartedAt("a")+h.restartedAt("b") != "" {
		t.Fatal("restarted before any jitter delay passed")
	}
	if want := dFirst - 100*time.Millisecond; res.RequeueAfter < want-time.Millisecond || res.RequeueAfter > want+requeueDelay {
		t.Fatalf("requeue after %s, want about %s (the first delay)", res.RequeueAfter, want)
	}
	h.clock.SetTime(slot.Add(dFirst))
	h.reconcile("s")
	if h.restartedAt(first) == "" || h.restartedAt(second) != "" {
		t.Fatalf("at the first delay: %s=%q %s=%q", first, h.restartedAt(first), second, h.restartedAt(second))
	}
	h.clock.SetTime(slot.Add(dSecond))
	h.reconcile("s")
	if h.restartedAt(second) != "2026-01-01T03:00:00Z" {
		t.Fatalf("at the second delay: %s=%q", second, h.restartedAt(second))
	}
}

func TestJitterDelay(t *testing.T) {
	slot := time.Date(2026, 1, 1, 3, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		bound time.Duration
		max   time.Duration
	}{
		"none":           {0, 0},
		"below 1ms":      {time.Microsecond, 0},
		"one minute":     {time.Minute, time.Minute},
		"twenty-four h":  {24 * time.Hour, 24 * time.Hour},
		"one second":     {time.Second, time.Second},
		"odd bound 7.5s": {7500 * time.Millisecond, 7500 * time.Millisecond},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			seen := map[time.Duration]bool{}
			for i := range 50 {
				w := "Deployment/w" + string(rune('a'+i%26)) + string(rune('a'+i/26))
				d := jitterDelay("uid", w, slot, tc.bound)
				if d != jitterDelay("uid", w, slot, tc.bound) {
					t.Fatal("not deterministic")
				}
				if d < 0 || (tc.max == 0 && d != 0) || (tc.max > 0 && d >= tc.max) {
					t.Fatalf("delay %s outside [0, %s)", d, tc.max)
				}
				seen[d] = true
			}
			if tc.max >= time.Second && len(seen) < 25 {
				t.Fatalf("50 workloads got only %d distinct delays", len(seen))
			}
		})
	}
	if jitterDelay("uid-1", "Deployment/a", slot, time.Hour) == jitterDelay("uid-2", "Deployment/a", slot, time.Hour) &&
		jitterDelay("uid-1", "Deployment/a", slot.Add(time.Hour), time.Hour) == jitterDelay("uid-2", "Deployment/a", slot.Add(time.Hour), time.Hour) {
		t.Fatal("two schedules get the same delays")
	}
}

// failurePolicy Stop: a failed rollout halts the rest of the run, sets
// RunStopped and Ready False, and the next run clears it; Continue goes on.
func TestUnitFailurePolicy(t *testing.T) {
	for _, policy := range []deckhandv1alpha1.RestartFailurePolicy{deckhandv1alpha1.RestartFailureStop, deckhandv1alpha1.RestartFailureContinue} {
		t.Run(string(policy), func(t *testing.T) {
			labels := map[string]string{"tier": "web"}
			h := newHarness(t, "2026-01-01T00:00:00Z", schedule("s", "0 3 * * *", "2026-01-01T00:00:00Z", func(rs *deckhandv1alpha1.RestartSchedule) {
				rs.Spec.Target = deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: labels}}
				rs.Spec.FailurePolicy = policy
			}), deployment("a", labels), deployment("b", labels), deployment("c", labels))
			h.wantRestartAt("2026-01-01T03:00:00.1Z", "a", "2026-01-01T03:00:00Z", "the first workload")
			d := h.deploy("a")
			d.Status.ObservedGeneration = d.Generation
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: "False", Reason: "ProgressDeadlineExceeded", Message: "timed out"}}
			if err := h.c.Status().Update(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			h.set("2026-01-01T03:05:00Z")
			h.reconcile("s")
			rs := h.rs("s")
			stopped := meta.FindStatusCondition(rs.Status.Conditions, deckhandv1alpha1.RestartScheduleRunStoppedCondition)
			ready := meta.FindStatusCondition(rs.Status.Conditions, deckhandv1alpha1.ReadyCondition)
			if policy == deckhandv1alpha1.RestartFailureContinue {
				if h.restartedAt("b") == "" || stopped == nil || stopped.Status != metav1.ConditionFalse {
					t.Fatalf("Continue: b not restarted (%q) or RunStopped %+v", h.restartedAt("b"), stopped)
				}
				return
			}
			if h.restartedAt("b") != "" || h.restartedAt("c") != "" || len(rs.Status.Pending)+len(rs.Status.Active) != 0 {
				t.Fatalf("Stop: the run went on: b=%q c=%q status %+v", h.restartedAt("b"), h.restartedAt("c"), rs.Status)
			}
			want := []string{"Skipped 2026-01-01T03:00:00Z Deployment/c", "Skipped 2026-01-01T03:00:00Z Deployment/b", "Failed 2026-01-01T03:00:00Z Deployment/a"}
			if got := results(rs); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("history %v, want %v", got, want)
			}
			if stopped == nil || stopped.Status != metav1.ConditionTrue || stopped.Reason != ReasonRunStopped ||
				!strings.Contains(stopped.Message, "Deployment/a failed") || !strings.Contains(stopped.Message, "not started: Deployment/b, Deployment/c") {
				t.Fatalf("RunStopped %+v", stopped)
			}
			if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != ReasonRunStopped {
				t.Fatalf("Ready %+v", ready)
			}
			if !hasEvent(h.drainEvents(), "Warning RunStopped") {
				t.Fatal("no RunStopped Warning event")
			}
			// The next run clears it.
			d = h.deploy("a")
			d.Status.Conditions = nil
			if err := h.c.Status().Update(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			h.set("2026-01-02T03:00:00.1Z")
			h.reconcile("s")
			rs = h.rs("s")
			if c := meta.FindStatusCondition(rs.Status.Conditions, deckhandv1alpha1.RestartScheduleRunStoppedCondition); c == nil || c.Status != metav1.ConditionFalse {
				t.Fatalf("RunStopped after the next run started: %+v", c)
			}
		})
	}
}

// The ignore-windows override travels from an annotated workload to its
// generated RestartSchedule with its token only.
func TestCopyRunNowOverride(t *testing.T) {
	cases := map[string]struct {
		workload, schedule map[string]string
		wantToken          string
		wantOverride       string
	}{
		"token alone": {map[string]string{deckhandv1alpha1.RestartScheduleRunNowAnnotation: "t1"}, nil, "t1", ""},
		"token and its override": {map[string]string{deckhandv1alpha1.RestartScheduleRunNowAnnotation: "t1",
			deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation: "t1"}, nil, "t1", "t1"},
		"override of another token": {map[string]string{deckhandv1alpha1.RestartScheduleRunNowAnnotation: "t2",
			deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation: "t1"}, nil, "t2", ""},
		"token already copied": {map[string]string{deckhandv1alpha1.RestartScheduleRunNowAnnotation: "t1",
			deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation: "t1"},
			map[string]string{deckhandv1alpha1.RestartScheduleRunNowAnnotation: "t1"}, "t1", ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := deployment("web", nil)
			d.Annotations = tc.workload
			rs := &deckhandv1alpha1.RestartSchedule{ObjectMeta: metav1.ObjectMeta{Annotations: tc.schedule}}
			copyRunNow(d, rs)
			if got := rs.Annotations[deckhandv1alpha1.RestartScheduleRunNowAnnotation]; got != tc.wantToken {
				t.Errorf("token %q, want %q", got, tc.wantToken)
			}
			if got := rs.Annotations[deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation]; got != tc.wantOverride {
				t.Errorf("override %q, want %q", got, tc.wantOverride)
			}
		})
	}
}
