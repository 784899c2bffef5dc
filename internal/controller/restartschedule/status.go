package restartschedule

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/conditions"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
)

// Condition reasons, stable for users' automation. InvalidSchedule,
// InvalidTimeZone and RestartFailed are Event reasons too, and Restarting is
// the reason of the Event of each workload restarted.
const (
	ReasonSuspended       = "Suspended"
	ReasonNotSuspended    = "NotSuspended"
	ReasonScheduleValid   = "ScheduleValid"
	ReasonInvalidSchedule = "InvalidSchedule"
	ReasonInvalidTimeZone = "InvalidTimeZone"
	ReasonScheduled       = "Scheduled"
	ReasonRestarting      = "Restarting"
	ReasonRestartFailed   = "RestartFailed"
	ReasonMissedSchedule  = "MissedSchedule"
)

// record adds a history entry, newest first.
func (s *scope) record(e deckhandv1alpha1.RestartRecord) {
	if e.CompletionTime == nil {
		t := metav1.NewTime(s.now)
		e.CompletionTime = &t
	}
	e.Message = truncateMessage(e.Message)
	st := &s.rs.Status
	// Trimmed as it grows: a run stopped with many workloads waiting
	// records each of them.
	st.History = append([]deckhandv1alpha1.RestartRecord{e}, st.History[:min(len(st.History), historyLimit(s.rs)-1)]...)
	s.results = append(s.results, e.Result)
}

// historyLimit is how many entries status.history keeps.
func historyLimit(rs *deckhandv1alpha1.RestartSchedule) int {
	if rs.Spec.HistoryLimit < 1 {
		return defaultHistoryLimit
	}
	return int(rs.Spec.HistoryLimit)
}

// summarize trims the history and sets nextScheduleTime and conditions.
func (r *Reconciler) summarize(_ context.Context, s *scope) (ctrl.Result, error) {
	rs, st := s.rs, &s.rs.Status
	if limit := historyLimit(rs); len(st.History) > limit {
		st.History = st.History[:limit]
	}
	gen := rs.Generation
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: truncateMessage(msg), ObservedGeneration: gen,
			LastTransitionTime: metav1.NewTime(s.now)})
	}

	var res ctrl.Result
	st.NextScheduleTime, st.NextRunScheduledTime, st.NextRunTime = nil, nil, nil
	if s.sched != nil && !rs.Spec.Suspend {
		next := s.next
		if next.IsZero() {
			next = s.sched.Next(s.now)
		}
		if !next.IsZero() {
			t := metav1.NewTime(next)
			st.NextScheduleTime = &t
			res = requeueToStart(next.Sub(s.now) + requeueDelay)
		}
		earliest := s.now
		if st.HandledThrough != nil {
			earliest = st.HandledThrough.Time
		}
		// The first run that will really start: windows, blackout dates,
		// outsideWindowPolicy and startingDeadlineSeconds applied.
		if slot, start := s.sched.NextRun(earliest, s.now, s.cal, deferToWindow(rs.Spec), startingDeadline(rs.Spec)); !slot.IsZero() {
			sl, t := metav1.NewTime(slot), metav1.NewTime(start)
			st.NextRunScheduledTime, st.NextRunTime = &sl, &t
		}
	}
	if !s.waitUntil.IsZero() {
		res = reconcileutil.LowestNonZero(res, requeueToStart(s.waitUntil.Sub(s.now)+requeueDelay))
	}

	switch {
	case s.stopped != "" && !s.runStarted:
		set(deckhandv1alpha1.RestartScheduleRunStoppedCondition, metav1.ConditionTrue, ReasonRunStopped, s.stopped)
	case s.runStarted || meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.RestartScheduleRunStoppedCondition) == nil:
		set(deckhandv1alpha1.RestartScheduleRunStoppedCondition, metav1.ConditionFalse, ReasonRunNotStopped, "")
	}

	if rs.Spec.Suspend {
		set(deckhandv1alpha1.RestartScheduleSuspendedCondition, metav1.ConditionTrue, ReasonSuspended, "spec.suspend is set: no new run starts")
	} else {
		set(deckhandv1alpha1.RestartScheduleSuspendedCondition, metav1.ConditionFalse, ReasonNotSuspended, "")
	}
	if s.invalidReason != "" {
		if !meta.IsStatusConditionTrue(st.Conditions, deckhandv1alpha1.RestartScheduleInvalidScheduleCondition) {
			s.event(nil, corev1.EventTypeWarning, s.invalidReason, "Schedule", "%s", s.invalidMsg)
		}
		set(deckhandv1alpha1.RestartScheduleInvalidScheduleCondition, metav1.ConditionTrue, s.invalidReason, s.invalidMsg)
		// Only a new spec can fix the schedule: stalled until then.
		conditions.Set(&st.Conditions, gen, s.now, conditions.Summary{State: conditions.Stalled, Reason: s.invalidReason, Message: s.invalidMsg})
		return res, nil
	}
	set(deckhandv1alpha1.RestartScheduleInvalidScheduleCondition, metav1.ConditionFalse, ReasonScheduleValid, "")
	if s.triggers {
		setTriggered(s, set)
		setMetricsUnavailable(s, set)
	}
	// A failed or missed run leaves the schedule not Ready but not stalled:
	// the next scheduled run may well succeed. A run in progress is not
	// Reconciling: the restarted workloads roll out, not the RestartSchedule.
	var summary conditions.Summary
	stopped := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.RestartScheduleRunStoppedCondition)
	switch {
	case len(st.Active) > 0:
		summary = conditions.Summary{State: conditions.Ready, Reason: ReasonRestarting,
			Message: fmt.Sprintf("%d workload(s) rolling out, %d waiting", len(st.Active), len(st.Pending)+s.unlisted)}
	case stopped != nil && stopped.Status == metav1.ConditionTrue:
		summary = conditions.Summary{State: conditions.Waiting, Reason: ReasonRunStopped, Message: stopped.Message}
	case len(st.History) > 0 && st.History[0].Result == deckhandv1alpha1.RestartFailed:
		summary = conditions.Summary{State: conditions.Waiting, Reason: ReasonRestartFailed, Message: st.History[0].Workload + ": " + st.History[0].Message}
	case len(st.History) > 0 && st.History[0].Result == deckhandv1alpha1.RestartMissed:
		summary = conditions.Summary{State: conditions.Waiting, Reason: ReasonMissedSchedule, Message: st.History[0].Message}
	case s.sched == nil:
		summary = conditions.Summary{State: conditions.Ready, Reason: ReasonScheduled, Message: "restarting on need only (spec.triggers)"}
	default:
		summary = conditions.Summary{State: conditions.Ready, Reason: ReasonScheduled, Message: "waiting for the next scheduled time"}
	}
	conditions.Set(&st.Conditions, gen, s.now, summary)
	return res, nil
}
