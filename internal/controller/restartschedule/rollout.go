package restartschedule

import (
	"context"
	"errors"
	"fmt"
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
	for _, a := range st.Active {
		start := a.StartTime
		rec := deckhandv1alpha1.RestartRecord{ScheduledTime: a.ScheduledTime, Trigger: a.Trigger, Workload: workloadKey(a.Kind, a.Name), StartTime: &start}
		obj, err := newWorkload(a.Kind)
		if err == nil {
			err = r.Client.Get(ctx, types.NamespacedName{Namespace: s.rs.Namespace, Name: a.Name}, obj)
		}
		switch {
		case apierrors.IsNotFound(err):
			rec.Result, rec.Message = deckhandv1alpha1.RestartFailed, "the workload was deleted before its rollout completed"
			s.record(rec)
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
			s.event(obj, corev1.EventTypeWarning, ReasonRestartFailed, "Restart", "%s: %s", rec.Workload, msg)
		case !s.now.Before(a.StartTime.Add(timeout)):
			rec.Result = deckhandv1alpha1.RestartFailed
			rec.Message = fmt.Sprintf("rollout did not complete within rolloutTimeout %s: %s", timeout, msg)
			s.record(rec)
			s.event(obj, corev1.EventTypeWarning, ReasonRestartFailed, "Restart", "%s: %s", rec.Workload, rec.Message)
		default:
			still = append(still, a)
			res = reconcileutil.LowestNonZero(res, requeueIn(a.StartTime.Add(timeout).Sub(s.now)), requeueIn(r.pollInterval()))
		}
	}
	st.Active = still
	return res, errors.Join(errs...)
}

// startPending restarts pending workloads while fewer than maxConcurrent
// are rolling out.
func (r *Reconciler) startPending(ctx context.Context, s *scope) (ctrl.Result, error) {
	rs, st := s.rs, &s.rs.Status
	if rs.Spec.Suspend || s.holdStarts {
		return ctrl.Result{}, nil
	}
	limit := int(rs.Spec.MaxConcurrent)
	if limit < 1 {
		limit = 1
	}
	var res ctrl.Result
	for len(st.Pending) > 0 && len(st.Active) < limit {
		p := st.Pending[0]
		key := workloadKey(p.Kind, p.Name)
		skip := func(msg string, related runtime.Object) {
			st.Pending = st.Pending[1:]
			s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: p.ScheduledTime, Trigger: p.Trigger, Workload: key, Result: deckhandv1alpha1.RestartSkipped, Message: msg})
			s.event(related, corev1.EventTypeNormal, ReasonRestartSkipped, "Restart", "%s: %s", key, msg)
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
		st.Pending = st.Pending[1:]
		st.Active = append(st.Active, deckhandv1alpha1.RestartActive{Kind: p.Kind, Name: p.Name, ScheduledTime: p.ScheduledTime, Trigger: p.Trigger,
			StartTime: metav1.NewTime(s.now), Generation: generation})
		res = requeueIn(r.pollInterval())
	}
	return res, nil
}
