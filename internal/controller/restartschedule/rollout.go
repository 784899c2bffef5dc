package restartschedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
)

func (r *Reconciler) rolloutTimeout(rs *deckhandv1alpha1.RestartSchedule) time.Duration {
	if rs.Spec.RolloutTimeout != nil && rs.Spec.RolloutTimeout.Duration > 0 {
		return rs.Spec.RolloutTimeout.Duration
	}
	return defaultRolloutTimeout
}

func (r *Reconciler) pollInterval() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return defaultPollInterval
}

// followRollouts checks every active restart with `kubectl rollout status`
// rules and records the finished ones.
func (r *Reconciler) followRollouts(ctx context.Context, s *scope) (ctrl.Result, error) {
	st := &s.rs.Status
	timeout := r.rolloutTimeout(s.rs)
	var still []deckhandv1alpha1.RestartActive
	var res ctrl.Result
	var errs []error
	var failed []deckhandv1alpha1.RestartRecord
	for _, a := range st.Active {
		start := a.StartTime
		rec := deckhandv1alpha1.RestartRecord{ScheduledTime: a.ScheduledTime, Trigger: a.Trigger, Workload: workloadKey(a.Kind, a.Name), Pod: a.Pod, Value: a.Value, StartTime: &start}
		obj, err := newWorkload(a.Kind)
		if err == nil {
			err = r.Client.Get(ctx, types.NamespacedName{Namespace: s.rs.Namespace, Name: a.Name}, obj)
		}
		switch {
		case apierrors.IsNotFound(err):
			rec.Result, rec.Message = deckhandv1alpha1.RestartFailed, "the workload was deleted before its rollout completed"
			s.record(rec)
			failed = append(failed, rec)
			s.event(nil, corev1.EventTypeWarning, ReasonRestartFailed, "Restart", "%s: %s", rec.Workload, rec.Message)
			continue
		case err != nil:
			errs = append(errs, err)
			still = append(still, a)
			continue
		}
		state, msg := rolloutStatus(obj, a.Generation)
		switch {
		case state == rolloutComplete:
			rec.Result, rec.Message = deckhandv1alpha1.RestartSucceeded, msg
			s.record(rec)
			t := metav1.NewTime(s.now)
			st.LastSuccessfulTime = &t
			s.event(obj, corev1.EventTypeNormal, ReasonRestarted, "Restart", "%s restarted for %s: %s", rec.Workload, describeRun(a.ScheduledTime.Time, a.Trigger), msg)
		case state == rolloutFailed:
			rec.Result, rec.Message = deckhandv1alpha1.RestartFailed, msg
			s.record(rec)
			failed = append(failed, rec)
			s.event(obj, corev1.EventTypeWarning, ReasonRestartFailed, "Restart", "%s: %s", rec.Workload, msg)
		case !s.now.Before(a.StartTime.Add(timeout)):
			rec.Result = deckhandv1alpha1.RestartFailed
			rec.Message = fmt.Sprintf("rollout did not complete within rolloutTimeout %s: %s", timeout, msg)
			s.record(rec)
			failed = append(failed, rec)
			s.event(obj, corev1.EventTypeWarning, ReasonRestartFailed, "Restart", "%s: %s", rec.Workload, rec.Message)
		default:
			still = append(still, a)
			res = reconcileutil.LowestNonZero(res, requeueIn(a.StartTime.Add(timeout).Sub(s.now)), requeueIn(r.pollInterval()))
		}
	}
	st.Active = still
	for _, f := range failed {
		stopRun(s, f)
	}
	return res, errors.Join(errs...)
}

// stopRun applies failurePolicy Stop after the restart recorded in failed
// failed: the workloads of its run not started yet are recorded as Skipped
// and leave pending, in the same status write as the failure, so a retried
// reconcile can neither start them nor lose the reason. Restarts of the
// run already rolling out are followed to completion.
func stopRun(s *scope, failed deckhandv1alpha1.RestartRecord) {
	st := &s.rs.Status
	if s.rs.Spec.FailurePolicy != deckhandv1alpha1.RestartFailureStop {
		return
	}
	run := describeRun(failed.ScheduledTime.Time, failed.Trigger)
	reason := fmt.Sprintf("%s failed: %s", failed.Workload, failed.Message)
	var keep []deckhandv1alpha1.RestartPending
	var halted []string
	why := fmt.Sprintf("not started: the run stopped because %s (failurePolicy Stop)", reason)
	for _, p := range st.Pending {
		if !p.ScheduledTime.Equal(&failed.ScheduledTime) || p.Trigger != failed.Trigger {
			keep = append(keep, p)
			continue
		}
		key := workloadKey(p.Kind, p.Name)
		halted = append(halted, key)
		s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: p.ScheduledTime, Trigger: p.Trigger, Workload: key, Result: deckhandv1alpha1.RestartSkipped, Message: why})
	}
	st.Pending = keep
	more := 0
	if len(keep) == 0 {
		// The workloads not listed yet belong to the run pending listed.
		more = dropUnlisted(s, deckhandv1alpha1.RestartPending{ScheduledTime: failed.ScheduledTime, Trigger: failed.Trigger}, deckhandv1alpha1.RestartSkipped, why)
	}
	if len(halted)+more == 0 && s.stopped != "" {
		// A second failure of a run this reconcile already stopped.
		return
	}
	notStarted := "no workload was left to start"
	if len(halted)+more > 0 {
		notStarted = "not started: " + describeWorkloads(halted, more)
	}
	s.stopped = fmt.Sprintf("%s stopped because %s; %s", run, reason, notStarted)
	s.event(nil, corev1.EventTypeWarning, ReasonRunStopped, "Restart", "%s (failurePolicy Stop)", s.stopped)
}

// startPending restarts pending workloads while fewer than maxConcurrent
// are rolling out, each once its jitter delay has passed and while the
// calendar lets restarts start. A workload the calendar holds back waits
// for the next opening (outsideWindowPolicy Defer, within
// startingDeadlineSeconds of its run's time) or is recorded as Skipped.
func (r *Reconciler) startPending(ctx context.Context, s *scope) (ctrl.Result, error) {
	rs, st := s.rs, &s.rs.Status
	if rs.Spec.Suspend || s.holdStarts {
		return ctrl.Result{}, nil
	}
	limit := int(rs.Spec.MaxConcurrent)
	if limit < 1 {
		limit = 1
	}
	jitter := jitterBound(rs.Spec)
	var res ctrl.Result
	wait := func(until time.Time) {
		res = reconcileutil.LowestNonZero(res, requeueIn(until.Sub(s.now)))
	}
	if len(st.Pending) == 0 {
		return ctrl.Result{}, nil
	}
	// The run of every workload pending lists, and of those it does not.
	run := st.Pending[0]
	for i := 0; len(st.Active) < limit; {
		if i == len(st.Pending) {
			// The listed workloads are started or waiting: list the next.
			if err := r.refillPending(ctx, s, run); err != nil {
				return ctrl.Result{}, err
			}
			if i == len(st.Pending) {
				break
			}
		}
		p := st.Pending[i]
		key := workloadKey(p.Kind, p.Name)
		skip := func(msg string, related runtime.Object) {
			st.Pending = slices.Delete(st.Pending, i, i+1)
			s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: p.ScheduledTime, Trigger: p.Trigger, Workload: key, Pod: p.Pod, Value: p.Value,
				Result: deckhandv1alpha1.RestartSkipped, Message: msg})
			s.event(related, corev1.EventTypeNormal, ReasonRestartSkipped, "Restart", "%s: %s", key, msg)
		}
		if due := p.ScheduledTime.Add(jitterDelay(rs.UID, key, p.ScheduledTime.Time, jitter)); s.now.Before(due) {
			wait(due)
			i++
			continue
		}
		if !p.IgnoreWindows {
			v := s.cal.Admit(p.ScheduledTime.Time, s.now, deferToWindow(rs.Spec), startingDeadline(rs.Spec))
			switch {
			case s.calInvalid:
				// Held until the calendar is fixed: starting would ignore it.
				i++
				continue
			case !v.WaitUntil.IsZero():
				wait(v.WaitUntil)
				i++
				continue
			case !v.Run:
				skip(calendarSkipPrefix+v.Reason, nil)
				continue
			}
		}
		obj, err := newWorkload(p.Kind)
		if err == nil {
			err = r.Client.Get(ctx, types.NamespacedName{Namespace: rs.Namespace, Name: p.Name}, obj)
		}
		if apierrors.IsNotFound(err) {
			skip(fmt.Sprintf("%s %q not found", p.Kind, p.Name), nil)
			continue
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		if reason := skipReason(obj); reason != "" {
			skip(reason, obj)
			continue
		}
		slot := formatSlot(p.ScheduledTime.Time)
		current := restartedAt(obj)
		generation := obj.GetGeneration()
		if patched, ok := r.patched.generation(rs.UID, key, slot); ok {
			// An earlier reconcile patched it and left the record to this
			// one; the cache may not show that patch yet.
			generation = max(generation, patched)
			s.event(obj, corev1.EventTypeNormal, ReasonRestarting, "Restart", "restarting %s for %s", key, describeRun(p.ScheduledTime.Time, p.Trigger))
		} else if current != slot {
			if ct, perr := time.Parse(time.RFC3339, current); perr == nil && ct.After(p.ScheduledTime.Time) {
				skip(fmt.Sprintf("already restarted for the later scheduled time %s", current), obj)
				continue
			}
			if err := r.Client.Patch(ctx, obj, restartPatch(p.ScheduledTime.Time), client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
				if apierrors.IsNotFound(err) {
					skip(fmt.Sprintf("%s %q not found", p.Kind, p.Name), nil)
					continue
				}
				return ctrl.Result{}, fmt.Errorf("restarting %s: %w", key, err)
			}
			restartSkew.Observe(r.Clock.Now().Sub(p.ScheduledTime.Time).Seconds())
			generation = obj.GetGeneration()
			r.patched.remember(rs.UID, key, slot, generation)
			s.patchedWorkloads = true
			s.event(obj, corev1.EventTypeNormal, ReasonRestarting, "Restart", "restarting %s for %s", key, describeRun(p.ScheduledTime.Time, p.Trigger))
		}
		// Else the annotation already carries this slot: an earlier attempt
		// patched it (crash, conflict, another replica). Follow that
		// rollout instead of restarting again.
		st.Pending = slices.Delete(st.Pending, i, i+1)
		st.Active = append(st.Active, deckhandv1alpha1.RestartActive{Kind: p.Kind, Name: p.Name, ScheduledTime: p.ScheduledTime, Trigger: p.Trigger,
			Pod: p.Pod, Value: p.Value, StartTime: metav1.NewTime(s.now), Generation: generation})
		res = reconcileutil.LowestNonZero(res, requeueIn(r.pollInterval()))
	}
	// NOTE: pending lists a workload whenever the run has one waiting, so
	// that a run in progress shows in pending (concurrencyPolicy, resume)
	// and the next reconcile knows the run's time and trigger.
	if len(st.Pending) == 0 {
		if err := r.refillPending(ctx, s, run); err != nil {
			return ctrl.Result{}, err
		}
	}
	return res, nil
}
