package restartschedule

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// record adds a history entry, newest first.
func (s *scope) record(e deckhandv1alpha1.RestartRecord) {
	if e.CompletionTime == nil {
		t := metav1.NewTime(s.now)
		e.CompletionTime = &t
	}
	st := &s.rs.Status
	st.History = append([]deckhandv1alpha1.RestartRecord{e}, st.History...)
	s.results = append(s.results, e.Result)
}

// summarize trims the history and sets nextScheduleTime and conditions.
func (r *Reconciler) summarize(_ context.Context, s *scope) error {
	rs, st := s.rs, &s.rs.Status
	limit := int(rs.Spec.HistoryLimit)
	if limit < 1 {
		limit = defaultHistoryLimit
	}
	if len(st.History) > limit {
		st.History = st.History[:limit]
	}
	gen := rs.Generation
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen})
	}

	st.NextScheduleTime = nil
	if s.sched != nil && !rs.Spec.Suspend {
		next := s.next
		if next.IsZero() {
			next = s.sched.Next(s.now)
		}
		if !next.IsZero() {
			t := metav1.NewTime(next)
			st.NextScheduleTime = &t
			s.requeueIn(next.Sub(s.now) + requeueDelay)
		}
	}

	if rs.Spec.Suspend {
		set(deckhandv1alpha1.RestartScheduleSuspended, metav1.ConditionTrue, "Suspended", "spec.suspend is set: no new run starts")
	} else {
		set(deckhandv1alpha1.RestartScheduleSuspended, metav1.ConditionFalse, "NotSuspended", "")
	}
	if s.sched == nil {
		if !meta.IsStatusConditionTrue(st.Conditions, deckhandv1alpha1.RestartScheduleInvalidSchedule) {
			s.event(nil, corev1.EventTypeWarning, s.invalidReason, "Schedule", "%s", s.invalidMsg)
		}
		set(deckhandv1alpha1.RestartScheduleInvalidSchedule, metav1.ConditionTrue, s.invalidReason, s.invalidMsg)
		set(deckhandv1alpha1.RestartScheduleReady, metav1.ConditionFalse, s.invalidReason, s.invalidMsg)
		return nil
	}
	set(deckhandv1alpha1.RestartScheduleInvalidSchedule, metav1.ConditionFalse, "ScheduleValid", "")
	switch {
	case len(st.Active) > 0:
		set(deckhandv1alpha1.RestartScheduleReady, metav1.ConditionTrue, "Restarting",
			fmt.Sprintf("%d workload(s) rolling out, %d waiting", len(st.Active), len(st.Pending)))
	case len(st.History) > 0 && st.History[0].Result == deckhandv1alpha1.RestartFailed:
		set(deckhandv1alpha1.RestartScheduleReady, metav1.ConditionFalse, "RestartFailed", st.History[0].Workload+": "+st.History[0].Message)
	case len(st.History) > 0 && st.History[0].Result == deckhandv1alpha1.RestartMissed:
		set(deckhandv1alpha1.RestartScheduleReady, metav1.ConditionFalse, "MissedSchedule", st.History[0].Message)
	default:
		set(deckhandv1alpha1.RestartScheduleReady, metav1.ConditionTrue, "Scheduled", "waiting for the next scheduled time")
	}
	return nil
}
