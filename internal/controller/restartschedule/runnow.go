package restartschedule

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/cronschedule"
)

// Event reasons of a run-now request.
const (
	// ReasonRunNowRefused: a run-now token arrived while suspended.
	ReasonRunNowRefused = "RunNowRefused"
)

// runNowChanged lets through updates that change the run-now annotation,
// which GenerationChangedPredicate drops (metadata does not move the
// generation). Other annotation changes stay filtered.
var runNowChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return runNowToken(e.ObjectOld.GetAnnotations()) != runNowToken(e.ObjectNew.GetAnnotations())
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

func runNowToken(ann map[string]string) string {
	return ann[deckhandv1alpha1.RestartScheduleRunNowAnnotation]
}

// runNow starts the run a new run-now token asks for, with the rules of a
// scheduled time (concurrencyPolicy, targets, history, Events), or refuses
// it while suspended. The run's start time, now, is the restarted-at value
// it writes. The token, the start time (in pending) and the records are
// written before any workload is patched: this reconcile patches nothing
// (holdStarts) and the next one, reading them back, starts the workloads. A
// retry after a crash between a patch and the status write that follows
// finds the same start time in pending and in the workload, and adopts the
// rollout instead of restarting again.
func (r *Reconciler) runNow(ctx context.Context, s *scope) (ctrl.Result, error) {
	rs, st := s.rs, &s.rs.Status
	token := runNowToken(rs.Annotations)
	if token == "" || token == st.LastRunNowToken {
		return ctrl.Result{}, nil
	}
	start := metav1.NewTime(s.now.Truncate(time.Second))
	run := func(rec deckhandv1alpha1.RestartRecord) {
		rec.ScheduledTime, rec.Trigger = start, deckhandv1alpha1.RestartTriggerRunNow
		s.record(rec)
	}
	if rs.Spec.Suspend {
		st.LastRunNowToken = token
		msg := fmt.Sprintf("run-now %q refused: spec.suspend is set", token)
		run(deckhandv1alpha1.RestartRecord{Result: deckhandv1alpha1.RestartSkipped, Message: msg})
		s.event(nil, corev1.EventTypeWarning, ReasonRunNowRefused, "RunNow", "%s; the request is dropped, not kept for the resume", msg)
		return ctrl.Result{}, nil
	}
	if len(st.Active)+len(st.Pending) > 0 && rs.Spec.ConcurrencyPolicy != deckhandv1alpha1.RestartReplace {
		st.LastRunNowToken = token
		msg := fmt.Sprintf("run-now %q: the run scheduled at %s is still rolling out (concurrencyPolicy Forbid)", token, formatSlot(runSlot(st)))
		run(deckhandv1alpha1.RestartRecord{Result: deckhandv1alpha1.RestartSkipped, Message: msg})
		s.event(nil, corev1.EventTypeNormal, ReasonRunSkipped, "RunNow", "skipped %s", msg)
		return ctrl.Result{}, nil
	}
	// Windows and blackout dates apply to a run-now as to a scheduled time,
	// unless the request carries the override for this very token.
	ignoreWindows := rs.Annotations[deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation] == token
	deferred := ""
	if !ignoreWindows {
		v := s.cal.Admit(start.Time, s.now, deferToWindow(rs.Spec), startingDeadline(rs.Spec))
		if s.calInvalid {
			v = cronschedule.Verdict{Reason: "spec.windows or spec.blackoutDates cannot be used: " + s.invalidMsg}
		}
		switch {
		case !v.WaitUntil.IsZero():
			deferred = fmt.Sprintf("; %s", v.Reason)
		case !v.Run:
			st.LastRunNowToken = token
			msg := fmt.Sprintf("run-now %q refused: %s", token, v.Reason)
			run(deckhandv1alpha1.RestartRecord{Result: deckhandv1alpha1.RestartSkipped, Message: msg})
			s.event(nil, corev1.EventTypeWarning, ReasonRunNowRefused, "RunNow", "%s; set the %s annotation to the same token to start it anyway",
				msg, deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation)
			return ctrl.Result{}, nil
		}
	}
	targets, err := listTargets(ctx, r.Client, rs)
	if err != nil {
		// Nothing recorded: the token stays new and the retry runs it.
		return ctrl.Result{}, fmt.Errorf("listing the workloads of spec.target: %w", err)
	}
	st.LastRunNowToken = token
	replaceRun(s, fmt.Sprintf("superseded by run-now %q (concurrencyPolicy Replace)", token))
	if len(targets) == 0 {
		run(deckhandv1alpha1.RestartRecord{Result: deckhandv1alpha1.RestartSkipped,
			Message: fmt.Sprintf("run-now %q: no Deployment, StatefulSet, DaemonSet or PodSet matches spec.target.selector", token)})
		s.event(nil, corev1.EventTypeNormal, ReasonRunSkipped, "RunNow", "run-now %q matched no workload", token)
		return ctrl.Result{}, nil
	}
	queue(s, targets, deckhandv1alpha1.RestartPending{ScheduledTime: start, Trigger: deckhandv1alpha1.RestartTriggerRunNow, IgnoreWindows: ignoreWindows})
	s.holdStarts = true
	s.runStarted = true
	override := ""
	if ignoreWindows {
		override = " (ignoring windows and blackout dates)"
	}
	s.event(nil, corev1.EventTypeNormal, ReasonRunStarted, "RunNow", "run-now %q started at %s for %d workload(s)%s%s", token, formatSlot(start.Time), len(targets), override, deferred)
	return requeueToStart(0), nil
}

// replaceRun ends the run in progress, if any, for a new one under
// concurrencyPolicy Replace: its active restarts are recorded as Failed and
// its pending ones as Skipped, with msg saying what replaced them.
func replaceRun(s *scope, msg string) {
	st := &s.rs.Status
	if len(st.Active)+len(st.Pending) == 0 {
		return
	}
	for _, a := range st.Active {
		start := a.StartTime
		s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: a.ScheduledTime, Trigger: a.Trigger, Workload: workloadKey(a.Kind, a.Name), StartTime: &start,
			Result: deckhandv1alpha1.RestartFailed, Message: "rollout not complete when " + msg})
	}
	for _, p := range st.Pending {
		s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: p.ScheduledTime, Trigger: p.Trigger, Workload: workloadKey(p.Kind, p.Name),
			Result: deckhandv1alpha1.RestartSkipped, Message: "not started: " + msg})
	}
	if len(st.Pending) > 0 {
		dropUnlisted(s, st.Pending[0], deckhandv1alpha1.RestartSkipped, "not started: "+msg)
	}
	s.event(nil, corev1.EventTypeNormal, ReasonRunReplaced, "Schedule", "the previous run was still rolling out; %s", msg)
	st.Active, st.Pending = nil, nil
}

// describeRun names a run in Events: by its scheduled time, or for a run-now
// run or one a trigger started (action scope Workload) by its start time.
func describeRun(t time.Time, trigger deckhandv1alpha1.RestartTrigger) string {
	switch trigger {
	case deckhandv1alpha1.RestartTriggerRunNow:
		return "the run-now run started at " + formatSlot(t)
	case deckhandv1alpha1.RestartTriggerPodAge, deckhandv1alpha1.RestartTriggerMemory, deckhandv1alpha1.RestartTriggerQuery:
		return fmt.Sprintf("the restart the %s trigger started at %s", trigger, formatSlot(t))
	}
	return "the run scheduled at " + formatSlot(t)
}
