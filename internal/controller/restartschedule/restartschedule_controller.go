package restartschedule

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/cronschedule"
)

const (
	// activeWorkloadIndex indexes RestartSchedules by the "Kind/name" of the
	// workloads they are currently restarting, so that a workload's rollout
	// progress wakes exactly the schedules following it.
	activeWorkloadIndex = "status.activeWorkloads"
	// requeueDelay is added to a fire time so that a slightly fast clock
	// never wakes the controller just before the slot (as the CronJob
	// controller does).
	requeueDelay = 100 * time.Millisecond
	// defaultPollInterval re-checks rollouts in progress even when no watch
	// event arrives.
	defaultPollInterval   = 10 * time.Second
	defaultRolloutTimeout = 10 * time.Minute
	defaultHistoryLimit   = 10
)

// Reconciler runs RestartSchedules.
type Reconciler struct {
	client.Client
	// Clock tells the time; nil means the real clock. Tests inject a fake.
	Clock clock.PassiveClock
	// Recorder emits Events; SetupWithManager sets it when nil.
	Recorder events.EventRecorder
	// PollInterval bounds how long a rollout in progress goes unchecked
	// (default 10s); workload watch events normally come first.
	PollInterval time.Duration
}

// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=restartschedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=restartschedules/status,verbs=get;patch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the RestartSchedule controller with mgr.
// conflictRetryDelay is how soon a reconcile whose status write lost a
// conflict runs again, from a cache that has by then seen the other write.
const conflictRetryDelay = 100 * time.Millisecond

func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("deckhand-restartschedule")
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &deckhandv1alpha1.RestartSchedule{}, activeWorkloadIndex, activeWorkloads); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("restartschedule").
		// Many schedules often share a fire time ("0 3 * * *"). A reconcile
		// at a slot is two sequential API round trips (the workload patch,
		// then the status), so the restarts of 1000 schedules go out at
		// workers / (2 x API latency) per second: with 16 workers the last
		// was patched 2.5x later than by a plain client sending the same
		// patches with 16 workers. A worker is a goroutine waiting on the API
		// server, and a key is never reconciled by two workers at once
		// (docs/benchmarks.md, item 4).
		WithOptions(controller.Options{MaxConcurrentReconciles: 64}).
		// Status writes are our own; a schedule reacts to spec changes and
		// otherwise wakes itself at its next fire time.
		For(&deckhandv1alpha1.RestartSchedule{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	for _, kind := range workloadKinds {
		obj, _ := newWorkload(kind)
		b = b.Watches(obj, handler.EnqueueRequestsFromMapFunc(r.schedulesFollowing(kind)))
	}
	return b.Complete(r)
}

// activeWorkloads is the index function of activeWorkloadIndex.
func activeWorkloads(o client.Object) []string {
	rs := o.(*deckhandv1alpha1.RestartSchedule)
	keys := make([]string, 0, len(rs.Status.Active))
	for _, a := range rs.Status.Active {
		keys = append(keys, workloadKey(a.Kind, a.Name))
	}
	return keys
}

// schedulesFollowing maps a workload event to the RestartSchedules
// following its rollout.
func (r *Reconciler) schedulesFollowing(kind string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list deckhandv1alpha1.RestartScheduleList
		if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()),
			client.MatchingFields{activeWorkloadIndex: workloadKey(kind, o.GetName())}); err != nil {
			logf.FromContext(ctx).Error(err, "listing RestartSchedules following a workload")
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for _, rs := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rs.Namespace, Name: rs.Name}})
		}
		return reqs
	}
}

// scope is the state of one reconcile.
type scope struct {
	rs    *deckhandv1alpha1.RestartSchedule
	now   time.Time
	sched *cronschedule.Schedule
	// invalidReason/invalidMsg describe why sched is nil.
	invalidReason, invalidMsg string
	next                      time.Time
	requeue                   time.Duration
	// events and results are emitted only once the status that records
	// them is written, so that a retried reconcile never reports twice.
	events  []pendingEvent
	results []deckhandv1alpha1.RestartResult
}

type pendingEvent struct {
	related             runtime.Object
	typ, reason, action string
	note                string
}

func (s *scope) event(related runtime.Object, typ, reason, action, format string, args ...any) {
	s.events = append(s.events, pendingEvent{related: related, typ: typ, reason: reason, action: action, note: fmt.Sprintf(format, args...)})
}

func (s *scope) requeueIn(d time.Duration) {
	if d <= 0 {
		d = time.Millisecond
	}
	if s.requeue == 0 || d < s.requeue {
		s.requeue = d
	}
}

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

// Reconcile runs the phases of a RestartSchedule and writes its status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	rs := &deckhandv1alpha1.RestartSchedule{}
	if err := r.Get(ctx, req.NamespacedName, rs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rs.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	orig := rs.DeepCopy()
	s := &scope{rs: rs, now: r.Clock.Now()}

	var errs []error
	for _, phase := range []func(context.Context, *scope) error{
		r.parseSchedule,
		r.observeSchedule,
		r.followRollouts,
		r.fire,
		r.startPending,
		r.summarize,
	} {
		if err := phase(ctx, s); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		rs.Status.ObservedGeneration = rs.Generation
	}
	if !apiequality.Semantic.DeepEqual(orig.Status, rs.Status) {
		// Optimistic locking: a reconcile working from a stale cached copy
		// must not overwrite history written by the previous one. Workload
		// patches made before a conflict are idempotent per slot, so the
		// retry adopts them instead of restarting again.
		if err := r.Status().Patch(ctx, rs, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) {
				log.V(1).Info("status conflict, retrying", "restartschedule", klog.KObj(rs))
				return ctrl.Result{RequeueAfter: conflictRetryDelay}, nil
			}
			return ctrl.Result{}, err
		}
	}
	for _, res := range s.results {
		restartsTotal.WithLabelValues(string(res)).Inc()
	}
	for _, e := range s.events {
		r.Recorder.Eventf(rs, e.related, e.typ, e.reason, e.action, "%s", e.note)
	}
	return ctrl.Result{RequeueAfter: s.requeue}, kerrors.NewAggregate(errs)
}

// parseSchedule parses spec.schedule in spec.timeZone.
func (r *Reconciler) parseSchedule(_ context.Context, s *scope) error {
	spec := s.rs.Spec
	if _, err := cronschedule.LoadLocation(spec.TimeZone); err != nil {
		s.invalidReason, s.invalidMsg = "InvalidTimeZone", "spec.timeZone: "+err.Error()
		return nil
	}
	sched, err := cronschedule.New(spec.Schedule, spec.TimeZone, s.now)
	if err != nil {
		s.invalidReason, s.invalidMsg = "InvalidSchedule", fmt.Sprintf("spec.schedule: %q: %v", spec.Schedule, err)
		return nil
	}
	s.sched = sched
	return nil
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
func (r *Reconciler) observeSchedule(_ context.Context, s *scope) error {
	st := &s.rs.Status
	if s.sched == nil {
		// Remember the invalid schedule: whatever valid schedule replaces
		// it is an edit, and starts from the time of that edit.
		st.ObservedSchedule = scheduleKey(s.rs.Spec)
		return nil
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
	wasSuspended := meta.IsStatusConditionTrue(st.Conditions, deckhandv1alpha1.RestartScheduleSuspended)
	if wasSuspended && !s.rs.Spec.Suspend {
		if st.HandledThrough == nil || st.HandledThrough.Time.Before(now.Time) {
			// Resumed: slots that passed while suspended are not run.
			st.HandledThrough = &now
		}
		abandonLateRun(s)
	}
	return nil
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
	for _, p := range st.Pending {
		late := s.now.Sub(p.ScheduledTime.Time)
		if late <= deadline {
			keep = append(keep, p)
			continue
		}
		key := workloadKey(p.Kind, p.Name)
		missed = append(missed, key)
		slot = p.ScheduledTime.Time
		s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: p.ScheduledTime, Workload: key, Result: deckhandv1alpha1.RestartMissed,
			Message: fmt.Sprintf("not started: the run was suspended and resumed %s after its scheduled time, more than startingDeadlineSeconds (%ds)",
				late.Truncate(time.Second), *secs)})
	}
	st.Pending = keep
	if len(missed) > 0 {
		s.event(nil, corev1.EventTypeWarning, "MissSchedule", "Schedule",
			"the run scheduled at %s was not continued after resuming: it is more than startingDeadlineSeconds (%d) old; not restarted: %s",
			formatSlot(slot), *secs, strings.Join(missed, ", "))
	}
}

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
func (r *Reconciler) followRollouts(ctx context.Context, s *scope) error {
	st := &s.rs.Status
	timeout := r.rolloutTimeout(s.rs)
	var still []deckhandv1alpha1.RestartActive
	var errs []error
	for _, a := range st.Active {
		start := a.StartTime
		rec := deckhandv1alpha1.RestartRecord{ScheduledTime: a.ScheduledTime, Workload: workloadKey(a.Kind, a.Name), StartTime: &start}
		obj, err := newWorkload(a.Kind)
		if err == nil {
			err = r.Get(ctx, types.NamespacedName{Namespace: s.rs.Namespace, Name: a.Name}, obj)
		}
		switch {
		case apierrors.IsNotFound(err):
			rec.Result, rec.Message = deckhandv1alpha1.RestartFailed, "the workload was deleted before its rollout completed"
			s.record(rec)
			s.event(nil, corev1.EventTypeWarning, "RestartFailed", "Restart", "%s: %s", rec.Workload, rec.Message)
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
			s.event(obj, corev1.EventTypeNormal, "Restarted", "Restart", "%s restarted for the run scheduled at %s: %s", rec.Workload, formatSlot(a.ScheduledTime.Time), msg)
		case state == rolloutFailed:
			rec.Result, rec.Message = deckhandv1alpha1.RestartFailed, msg
			s.record(rec)
			s.event(obj, corev1.EventTypeWarning, "RestartFailed", "Restart", "%s: %s", rec.Workload, msg)
		case !s.now.Before(a.StartTime.Add(timeout)):
			rec.Result = deckhandv1alpha1.RestartFailed
			rec.Message = fmt.Sprintf("rollout did not complete within rolloutTimeout %s: %s", timeout, msg)
			s.record(rec)
			s.event(obj, corev1.EventTypeWarning, "RestartFailed", "Restart", "%s: %s", rec.Workload, rec.Message)
		default:
			still = append(still, a)
			s.requeueIn(a.StartTime.Add(timeout).Sub(s.now))
			s.requeueIn(r.pollInterval())
		}
	}
	st.Active = still
	return kerrors.NewAggregate(errs)
}

// fire starts the run of the due slot, if any, by the CronJob rules.
func (r *Reconciler) fire(ctx context.Context, s *scope) error {
	rs, st := s.rs, &s.rs.Status
	if s.sched == nil || rs.Spec.Suspend || st.HandledThrough == nil {
		return nil
	}
	var deadline *time.Duration
	if rs.Spec.StartingDeadlineSeconds != nil {
		d := time.Duration(*rs.Spec.StartingDeadlineSeconds) * time.Second
		deadline = &d
	}
	plan := s.sched.PlanAt(st.HandledThrough.Time, s.now, deadline)
	s.next = plan.Next
	if plan.Slot.IsZero() {
		return nil
	}
	slot := metav1.NewTime(plan.Slot)
	if plan.TooMany {
		s.event(nil, corev1.EventTypeWarning, "TooManyMissedTimes", "Schedule",
			"more than %d scheduled times were missed since %s; only the latest (%s) is considered. Check the clocks and the manager's availability",
			cronschedule.MaxMissed, formatSlot(st.HandledThrough.Time), formatSlot(plan.Slot))
	}
	if plan.Missed {
		st.HandledThrough = &slot
		s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: slot, Result: deckhandv1alpha1.RestartMissed,
			Message: fmt.Sprintf("not started within startingDeadlineSeconds (%ds) of its scheduled time; %s scheduled time(s) missed",
				*rs.Spec.StartingDeadlineSeconds, missedCount(plan))})
		s.event(nil, corev1.EventTypeWarning, "MissSchedule", "Schedule", "missed the run scheduled at %s (startingDeadlineSeconds %d)", formatSlot(plan.Slot), *rs.Spec.StartingDeadlineSeconds)
		return nil
	}
	if len(st.Active)+len(st.Pending) > 0 && rs.Spec.ConcurrencyPolicy != deckhandv1alpha1.RestartReplace {
		st.HandledThrough = &slot
		s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: slot, Result: deckhandv1alpha1.RestartSkipped,
			Message: fmt.Sprintf("the run scheduled at %s is still rolling out (concurrencyPolicy Forbid)", formatSlot(runSlot(st)))})
		s.event(nil, corev1.EventTypeNormal, "RunSkipped", "Schedule", "skipped the run scheduled at %s: the previous run is still rolling out (concurrencyPolicy Forbid)", formatSlot(plan.Slot))
		return nil
	}
	targets, err := listTargets(ctx, r.Client, rs)
	if err != nil {
		// Nothing recorded: the slot stays due and the retry runs it.
		return fmt.Errorf("listing the workloads of spec.target: %w", err)
	}
	st.HandledThrough = &slot
	st.LastScheduleTime = &slot
	if len(st.Active)+len(st.Pending) > 0 { // concurrencyPolicy Replace
		msg := fmt.Sprintf("superseded by the run scheduled at %s (concurrencyPolicy Replace)", formatSlot(plan.Slot))
		for _, a := range st.Active {
			start := a.StartTime
			s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: a.ScheduledTime, Workload: workloadKey(a.Kind, a.Name), StartTime: &start,
				Result: deckhandv1alpha1.RestartFailed, Message: "rollout not complete when " + msg})
		}
		for _, p := range st.Pending {
			s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: p.ScheduledTime, Workload: workloadKey(p.Kind, p.Name),
				Result: deckhandv1alpha1.RestartSkipped, Message: "not started: " + msg})
		}
		s.event(nil, corev1.EventTypeNormal, "RunReplaced", "Schedule", "the previous run was still rolling out; %s", msg)
		st.Active, st.Pending = nil, nil
	}
	if len(targets) == 0 {
		s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: slot, Result: deckhandv1alpha1.RestartSkipped,
			Message: "no Deployment, StatefulSet or DaemonSet matches spec.target.selector"})
		s.event(nil, corev1.EventTypeNormal, "RunSkipped", "Schedule", "the run scheduled at %s matched no workload", formatSlot(plan.Slot))
		return nil
	}
	for _, t := range targets {
		st.Pending = append(st.Pending, deckhandv1alpha1.RestartPending{Kind: t.Kind, Name: t.Name, ScheduledTime: slot})
	}
	late := ""
	if plan.Count > 1 {
		late = fmt.Sprintf(" (%s scheduled times were missed; only the latest runs)", missedCount(plan))
	}
	if len(targets) > 1 || late != "" {
		// A run of one workload on time is told by its Restarting event
		// alone: at a popular schedule (every namespace restarting at
		// midnight) each Event is an API write competing with the restarts
		// themselves (docs/benchmarks.md, item 4).
		s.event(nil, corev1.EventTypeNormal, "RunStarted", "Schedule", "run scheduled at %s started for %d workload(s)%s", formatSlot(plan.Slot), len(targets), late)
	}
	return nil
}

func missedCount(p cronschedule.Plan) string {
	if p.TooMany {
		return fmt.Sprintf("more than %d", cronschedule.MaxMissed)
	}
	return fmt.Sprint(p.Count)
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

// startPending restarts pending workloads while fewer than maxConcurrent
// are rolling out.
func (r *Reconciler) startPending(ctx context.Context, s *scope) error {
	rs, st := s.rs, &s.rs.Status
	if rs.Spec.Suspend {
		return nil
	}
	limit := int(rs.Spec.MaxConcurrent)
	if limit < 1 {
		limit = 1
	}
	for len(st.Pending) > 0 && len(st.Active) < limit {
		p := st.Pending[0]
		key := workloadKey(p.Kind, p.Name)
		skip := func(msg string, related runtime.Object) {
			st.Pending = st.Pending[1:]
			s.record(deckhandv1alpha1.RestartRecord{ScheduledTime: p.ScheduledTime, Workload: key, Result: deckhandv1alpha1.RestartSkipped, Message: msg})
			s.event(related, corev1.EventTypeNormal, "RestartSkipped", "Restart", "%s: %s", key, msg)
		}
		obj, err := newWorkload(p.Kind)
		if err == nil {
			err = r.Get(ctx, types.NamespacedName{Namespace: rs.Namespace, Name: p.Name}, obj)
		}
		if apierrors.IsNotFound(err) {
			skip(fmt.Sprintf("%s %q not found", p.Kind, p.Name), nil)
			continue
		}
		if err != nil {
			return err
		}
		if reason := skipReason(obj); reason != "" {
			skip(reason, obj)
			continue
		}
		slot := formatSlot(p.ScheduledTime.Time)
		current := restartedAt(obj)
		if current != slot {
			if ct, perr := time.Parse(time.RFC3339, current); perr == nil && ct.After(p.ScheduledTime.Time) {
				skip(fmt.Sprintf("already restarted for the later scheduled time %s", current), obj)
				continue
			}
			if err := r.Patch(ctx, obj, restartPatch(p.ScheduledTime.Time), client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
				if apierrors.IsNotFound(err) {
					skip(fmt.Sprintf("%s %q not found", p.Kind, p.Name), nil)
					continue
				}
				return fmt.Errorf("restarting %s: %w", key, err)
			}
			restartSkew.Observe(r.Clock.Now().Sub(p.ScheduledTime.Time).Seconds())
			s.event(obj, corev1.EventTypeNormal, "Restarting", "Restart", "restarting %s for the run scheduled at %s", key, slot)
		}
		// Else the annotation already carries this slot: an earlier attempt
		// patched it (crash, conflict, another replica). Follow that
		// rollout instead of restarting again.
		st.Pending = st.Pending[1:]
		st.Active = append(st.Active, deckhandv1alpha1.RestartActive{Kind: p.Kind, Name: p.Name, ScheduledTime: p.ScheduledTime,
			StartTime: metav1.NewTime(s.now), Generation: obj.GetGeneration()})
		s.requeueIn(r.pollInterval())
	}
	return nil
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
