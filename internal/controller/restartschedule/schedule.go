package restartschedule

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/cronschedule"
)

// parseSchedule parses spec.schedule in spec.timeZone.
func (r *Reconciler) parseSchedule(_ context.Context, s *scope) (ctrl.Result, error) {
	spec := s.rs.Spec
	if _, err := cronschedule.LoadLocation(spec.TimeZone); err != nil {
		s.invalidReason, s.invalidMsg = ReasonInvalidTimeZone, "spec.timeZone: "+err.Error()
		return ctrl.Result{}, nil
	}
	var sched *cronschedule.Schedule
	switch {
	case spec.Schedule == "" && len(spec.Triggers) == 0:
		s.invalidReason, s.invalidMsg = ReasonInvalidSchedule, "spec.schedule: required unless spec.triggers are set"
		return ctrl.Result{}, nil
	case spec.Schedule != "":
		var err error
		if sched, err = cronschedule.New(spec.Schedule, spec.TimeZone, s.now); err != nil {
			s.invalidReason, s.invalidMsg = ReasonInvalidSchedule, fmt.Sprintf("spec.schedule: %q: %v", spec.Schedule, err)
			return ctrl.Result{}, nil
		}
	}
	// Without a schedule, sched stays nil: the workloads restart on need
	// only (spec.triggers).
	cal, err := parseCalendar(spec)
	if err != nil {
		s.calInvalid = true
		s.invalidReason, s.invalidMsg = ReasonInvalidWindows, err.Error()
		return ctrl.Result{}, nil
	}
	s.sched, s.cal = sched, cal
	return ctrl.Result{}, nil
}

// scheduleKey identifies the schedule slots refer to.
func scheduleKey(spec deckhandv1alpha1.RestartScheduleSpec) string {
	tz := spec.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	return spec.Schedule + "|" + tz
}

// observeSchedule moves handledThrough so that only slots after the
// creation, the last schedule edit or the last resume can run.
func (r *Reconciler) observeSchedule(_ context.Context, s *scope) (ctrl.Result, error) {
	st := &s.rs.Status
	if s.invalidReason != "" || s.sched == nil {
		// Remember the invalid (or absent) schedule: whatever valid schedule replaces
		// it is an edit, and starts from the time of that edit.
		st.ObservedSchedule = scheduleKey(s.rs.Spec)
		return ctrl.Result{}, nil
	}
	now := metav1.NewTime(s.now.Truncate(time.Second))
	key := scheduleKey(s.rs.Spec)
	switch {
	case st.ObservedSchedule == "" && s.rs.Generation <= 1:
		// First sight of an unedited object: slots after its creation run
		// (a manager that was down at the first slot runs it late).
		t := s.rs.CreationTimestamp
		st.HandledThrough = &t
	case st.ObservedSchedule != key:
		// Edited (possibly while the manager was down): never fire slots of
		// the new schedule retroactively.
		st.HandledThrough = &now
	}
	st.ObservedSchedule = key
	wasSuspended := meta.IsStatusConditionTrue(st.Conditions, deckhandv1alpha1.RestartScheduleSuspendedCondition)
	if wasSuspended && !s.rs.Spec.Suspend {
		if st.HandledThrough == nil || st.HandledThrough.Time.Before(now.Time) {
			// Resumed: slots that passed while suspended are not run.
			st.HandledThrough = &now
		}
		abandonLateRun(s)
	}
	return ctrl.Result{}, nil
}

// abandonLateRun is the resume rule for a run that a suspension interrupted:
// its workloads not yet restarted start only if the run's slot is still
// within startingDeadlineSeconds, as if the run were starting now; otherwise
// they are recorded as Missed. Without a deadline a late run always starts,
// so the run continues. The decision, the records and the removal from
// pending are one status write, so a retried reconcile cannot both record
// a workload as Missed and restart it.
func abandonLateRun(s *scope) {
	st := &s.rs.Status
	secs := s.rs.Spec.StartingDeadlineSeconds
	if secs == nil || len(st.Pending) == 0 {
		return
	}
	deadline := time.Duration(*secs) * time.Second
	var keep []deckhandv1alpha1.RestartPending
	var missed []string
	var slot time.Time
	var why string
	run := st.Pending[0]
	for _, p := range st.Pending {
		late := s.now.Sub(p.ScheduledTime.Time)
		if late <= deadline {
			keep = append(keep, p)
			continue
		}
		key := workloadKey(p.Kind, p.Name)
		missed = append(missed, key)
		slot = p.ScheduledTime.Time
		why = fmt.Sprintf("not started: the run was suspended and resumed %s after its scheduled time, more than startingDeadlineSeconds (%ds)",
			late.Truncate(time.Second), *secs)
		s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: p.ScheduledTime, Trigger: p.Trigger, Workload: key, Result: deckhandv1alpha1.RestartMissed, Message: why})
	}
	st.Pending = keep
	more := 0
	if len(keep) == 0 {
		// The workloads not listed yet belong to the same run.
		more = dropUnlisted(s, run, deckhandv1alpha1.RestartMissed, why)
	}
	if len(missed) > 0 {
		s.event(nil, corev1.EventTypeWarning, ReasonMissSchedule, "Schedule",
			"the run scheduled at %s was not continued after resuming: it is more than startingDeadlineSeconds (%d) old; not restarted: %s",
			formatSlot(slot), *secs, describeWorkloads(missed, more))
	}
}

// fire starts the run of the due slot, if any, by the CronJob rules.
func (r *Reconciler) fire(ctx context.Context, s *scope) (ctrl.Result, error) {
	rs, st := s.rs, &s.rs.Status
	if s.sched == nil || rs.Spec.Suspend || st.HandledThrough == nil {
		return ctrl.Result{}, nil
	}
	deadline := startingDeadline(rs.Spec)
	plan := s.sched.PlanAt(st.HandledThrough.Time, s.now, deadline)
	s.next = plan.Next
	if plan.Slot.IsZero() {
		return ctrl.Result{}, nil
	}
	slot := metav1.NewTime(plan.Slot)
	if plan.TooMany {
		s.event(nil, corev1.EventTypeWarning, ReasonTooManyMissedTimes, "Schedule",
			"more than %d scheduled times were missed since %s; only the latest (%s) is considered. Check the clocks and the manager's availability",
			cronschedule.MaxMissed, formatSlot(st.HandledThrough.Time), formatSlot(plan.Slot))
	}
	if plan.Missed {
		st.HandledThrough = &slot
		s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: slot, Result: deckhandv1alpha1.RestartMissed,
			Message: fmt.Sprintf("not started within startingDeadlineSeconds (%ds) of its scheduled time; %s scheduled time(s) missed",
				*rs.Spec.StartingDeadlineSeconds, missedCount(plan))})
		s.event(nil, corev1.EventTypeWarning, ReasonMissSchedule, "Schedule", "missed the run scheduled at %s (startingDeadlineSeconds %d)", formatSlot(plan.Slot), *rs.Spec.StartingDeadlineSeconds)
		return ctrl.Result{}, nil
	}
	// Windows and blackout dates: the run starts now, waits for the next
	// opening (the slot stays unhandled, so a later slot due by then
	// supersedes it), or is skipped.
	switch v := s.cal.Admit(plan.Slot, s.now, deferToWindow(rs.Spec), deadline); {
	case !v.WaitUntil.IsZero():
		s.waitUntil = v.WaitUntil
		if plan.Count > 1 {
			// The slots before this one are superseded by it: mark them
			// handled (slots are whole seconds apart), so that a long wait
			// on a frequent schedule does not count them as missed.
			before := metav1.NewTime(plan.Slot.Add(-time.Second))
			st.HandledThrough = &before
		}
		return ctrl.Result{}, nil
	case !v.Run:
		st.HandledThrough = &slot
		msg := calendarSkipPrefix + v.Reason
		if !deferToWindow(rs.Spec) {
			msg += " (outsideWindowPolicy Skip)"
		}
		if !recordCalendarSkip(s, deckhandv1alpha1.RestartRecord{ScheduledTime: slot, Message: msg}) {
			s.event(nil, corev1.EventTypeNormal, ReasonRunSkipped, "Schedule", "skipped the run scheduled at %s: %s", formatSlot(plan.Slot), v.Reason)
		}
		return ctrl.Result{}, nil
	}
	if len(st.Active)+len(st.Pending) > 0 && rs.Spec.ConcurrencyPolicy != deckhandv1alpha1.RestartReplace {
		st.HandledThrough = &slot
		s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: slot, Result: deckhandv1alpha1.RestartSkipped,
			Message: fmt.Sprintf("the run scheduled at %s is still rolling out (concurrencyPolicy Forbid)", formatSlot(runSlot(st)))})
		s.event(nil, corev1.EventTypeNormal, ReasonRunSkipped, "Schedule", "skipped the run scheduled at %s: the previous run is still rolling out (concurrencyPolicy Forbid)", formatSlot(plan.Slot))
		return ctrl.Result{}, nil
	}
	targets, err := listTargets(ctx, r.Client, rs)
	if err != nil {
		// Nothing recorded: the slot stays due and the retry runs it.
		return ctrl.Result{}, fmt.Errorf("listing the workloads of spec.target: %w", err)
	}
	st.HandledThrough = &slot
	st.LastScheduleTime = &slot
	// concurrencyPolicy Replace (Forbid returned above).
	replaceRun(s, fmt.Sprintf("superseded by the run scheduled at %s (concurrencyPolicy Replace)", formatSlot(plan.Slot)))
	if len(targets) == 0 {
		s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: slot, Result: deckhandv1alpha1.RestartSkipped,
			Message: "no Deployment, StatefulSet, DaemonSet or PodSet matches spec.target.selector"})
		s.event(nil, corev1.EventTypeNormal, ReasonRunSkipped, "Schedule", "the run scheduled at %s matched no workload", formatSlot(plan.Slot))
		return ctrl.Result{}, nil
	}
	queue(s, targets, deckhandv1alpha1.RestartPending{ScheduledTime: slot})
	s.runStarted = true
	late := ""
	if plan.Count > 1 {
		late = fmt.Sprintf(" (%s scheduled times were missed; only the latest runs)", missedCount(plan))
	}
	if len(targets) > 1 || late != "" {
		// A run of one workload on time is told by its Restarting event
		// alone: at a popular schedule (every namespace restarting at
		// midnight) each Event is an API write competing with the restarts
		// themselves (docs/benchmarks.md, item 4).
		s.event(nil, corev1.EventTypeNormal, ReasonRunStarted, "Schedule", "run scheduled at %s started for %d workload(s)%s", formatSlot(plan.Slot), len(targets), late)
	}
	return ctrl.Result{}, nil
}

func missedCount(p cronschedule.Plan) string {
	if p.TooMany {
		return fmt.Sprintf("more than %d", cronschedule.MaxMissed)
	}
	return fmt.Sprint(p.Count)
}

// runTrigger is what started the run in progress.
func runTrigger(st *deckhandv1alpha1.RestartScheduleStatus) deckhandv1alpha1.RestartTrigger {
	if len(st.Active) > 0 {
		return st.Active[0].Trigger
	}
	if len(st.Pending) > 0 {
		return st.Pending[0].Trigger
	}
	return ""
}

// runSlot is the scheduled time of the run in progress.
func runSlot(st *deckhandv1alpha1.RestartScheduleStatus) time.Time {
	if len(st.Active) > 0 {
		return st.Active[0].ScheduledTime.Time
	}
	if len(st.Pending) > 0 {
		return st.Pending[0].ScheduledTime.Time
	}
	return time.Time{}
}
