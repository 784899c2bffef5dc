package restartschedule

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/cronschedule"
	"github.com/deckhand-dev/deckhand/internal/eviction"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
	"github.com/deckhand-dev/deckhand/internal/statuspatch"
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

// Event reasons of a run; Events about an invalid schedule or a failed
// restart use the condition reasons (status.go).
const (
	ReasonRunStarted         = "RunStarted"
	ReasonRunSkipped         = "RunSkipped"
	ReasonRunReplaced        = "RunReplaced"
	ReasonMissSchedule       = "MissSchedule"
	ReasonTooManyMissedTimes = "TooManyMissedTimes"
	ReasonRestarted          = "Restarted"
	ReasonRestartSkipped     = "RestartSkipped"
)

// Reconciler runs RestartSchedules.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// Clock tells the time; nil means the real clock. Tests inject a fake.
	Clock clock.PassiveClock
	// Recorder emits Events; SetupWithManager sets it when nil.
	Recorder events.EventRecorder
	// PollInterval bounds how long a rollout in progress goes unchecked
	// (default 10s); workload watch events normally come first.
	PollInterval time.Duration

	// PodMetrics reads the resource metrics API for memory triggers;
	// SetupWithManager sets it when nil.
	PodMetrics PodMetricsSource
	// MetricsStaleAfter: a PodMetrics sample older than this is not acted
	// upon (default 3m: metrics-server samples every 60s by default).
	MetricsStaleAfter time.Duration
	// Queries runs the instant queries of query triggers;
	// SetupWithManager sets it when nil.
	Queries QuerySource
	// APIReader reads the Secrets and ConfigMaps query triggers name,
	// uncached; SetupWithManager sets it when nil.
	APIReader client.Reader

	patched patchedWorkloads
	evicted eviction.InFlight[evictedPod]
	series  seriesStore
	pods    podSource
	untold  untoldEvictions
}

const defaultMetricsStaleAfter = 3 * time.Minute

func (r *Reconciler) metricsStaleAfter() time.Duration {
	if r.MetricsStaleAfter > 0 {
		return r.MetricsStaleAfter
	}
	return defaultMetricsStaleAfter
}

// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=restartschedules,verbs=get;list;watch,roleName=manager-restartschedule-role
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=restartschedules/status,verbs=get;patch,roleName=manager-restartschedule-role
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch;patch,roleName=manager-restartschedule-role
// PodSets are restarted like Deployments: read, watched for their rollout,
// and patched on one pod-template annotation.
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=podsets,verbs=get;list;watch;patch,roleName=manager-restartschedule-role
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the RestartSchedule controller with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	reconcileutil.Defaults(mgr, "deckhand-restartschedule", reconcileutil.Fields{Client: &r.Client, Recorder: &r.Recorder, Clock: &r.Clock})
	if r.PodMetrics == nil {
		src, err := NewPodMetricsSource(mgr.GetConfig(), r.Clock, DefaultMetricsResolution)
		if err != nil {
			return err
		}
		r.PodMetrics = src
	}
	if r.Queries == nil {
		r.Queries = PrometheusQuerier{}
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &deckhandv1alpha1.RestartSchedule{}, activeWorkloadIndex, activeWorkloads); err != nil {
		return err
	}
	// Status writes are our own; a schedule reacts to spec changes and to a
	// new run-now token, and otherwise wakes itself at its next fire time.
	b := reconcileutil.NewController(mgr, "restartschedule", Workers, &deckhandv1alpha1.RestartSchedule{},
		predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, runNowChanged))
	for _, kind := range targetKinds {
		obj, _ := newWorkload(kind)
		b = b.Watches(obj, handler.EnqueueRequestsFromMapFunc(r.schedulesFollowing(kind)))
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &deckhandv1alpha1.RestartSchedule{}, awaitingTurnIndex, awaitingTurn); err != nil {
		return err
	}
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	r.pods.cache = mgr.GetCache()
	r.pods.watch = func() error { return c.Watch(r.podTurnSource(mgr.GetCache())) }
	return nil
}

// Workers is the number of RestartSchedules reconciled at once. Many
// schedules often share a fire time ("0 3 * * *"); a reconcile at a slot is
// one API round trip (the workload patch; the status follows in a later
// reconcile, statusAfterPatchDelay), so the restarts of n schedules go out
// at Workers / API latency per second. A worker is a goroutine waiting on
// the API server, and a key is never reconciled by two workers at once. The
// benchmark's plain-client baseline (hack/bench, item 4) sends its patches
// with as many workers.
const Workers = 64

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
		return r.schedulesIndexed(ctx, o.GetNamespace(), activeWorkloadIndex, workloadKey(kind, o.GetName()))
	}
}

// schedulesIndexed are the requests of the RestartSchedules in namespace
// whose index holds key.
func (r *Reconciler) schedulesIndexed(ctx context.Context, namespace, index, key string) []reconcile.Request {
	var list deckhandv1alpha1.RestartScheduleList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{index: key}); err != nil {
		logf.FromContext(ctx).Error(err, "listing RestartSchedules by index", "index", index, "key", key)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, rs := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rs.Namespace, Name: rs.Name}})
	}
	return reqs
}

// scope is the state of one reconcile.
type scope struct {
	rs    *deckhandv1alpha1.RestartSchedule
	now   time.Time
	sched *cronschedule.Schedule
	// cal is the calendar of spec.windows and spec.blackoutDates; nil when
	// neither is set. calInvalid is set when they cannot be parsed: then
	// nothing starts except a run-now with the override.
	cal        *cronschedule.Calendar
	calInvalid bool
	// invalidReason/invalidMsg describe why sched is nil.
	invalidReason, invalidMsg string
	next                      time.Time
	// waitUntil is when a run deferred to a window, or a workload waiting
	// for its jitter or a window, is due: the reconcile requeues for it.
	waitUntil time.Time
	// stopped is set when failurePolicy Stop halted a run in this
	// reconcile (the RunStopped condition's message); runStarted when a new
	// run was queued (RunStopped turns False).
	stopped    string
	runStarted bool
	// events and results are emitted only once the status that records
	// them is written, so that a retried reconcile never reports twice.
	events  []pendingEvent
	results []deckhandv1alpha1.RestartResult
	// patchedWorkloads is set when this reconcile restarted a workload:
	// its status is then written by the next one (statusAfterPatchDelay).
	patchedWorkloads bool
	// holdStarts is set when this reconcile queued a run-now run: its start
	// time must be in the status before any workload is patched with it.
	holdStarts bool
	// unlisted is how many waiting workloads of the current run
	// status.pending does not list (pending.go); pendingCount is written
	// from it.
	unlisted int
	// triggers is set when spec.triggers are evaluated; candidates are the
	// pods they name, worst first (need.go).
	triggers   bool
	candidates []needCandidate
	// missing says which pods memory triggers could not judge, by
	// MetricsUnavailable reason.
	missing map[string][]string
	// evictions are the evictions this status records (untold.go).
	evictions []evictionRecord
}

// waitUntilEarliest makes the reconcile requeue at t, unless an earlier
// wait is already set.
func (s *scope) waitUntilEarliest(t time.Time) {
	if s.waitUntil.IsZero() || t.Before(s.waitUntil) {
		s.waitUntil = t
	}
}

type pendingEvent struct {
	related             runtime.Object
	typ, reason, action string
	note                string
}

func (s *scope) event(related runtime.Object, typ, reason, action, format string, args ...any) {
	s.events = append(s.events, newEvent(related, typ, reason, action, format, args...))
}

func newEvent(related runtime.Object, typ, reason, action, format string, args ...any) pendingEvent {
	return pendingEvent{related: related, typ: typ, reason: reason, action: action, note: truncateMessage(fmt.Sprintf(format, args...))}
}

// Priorities of the controller's queue.
//
// NOTE: at a slot many schedules share ("0 3 * * *") every one of them is
// due at once, and each restart sends its workload's rollout events back as
// reconciles of the schedule following it. A schedule waking for a run it
// may start is served before those, so that the last restarts of a slot
// do not wait behind the rollouts of the first. A result sets its priority
// always: without one, the queue keeps the priority the request came with,
// and follow-up work would inherit a start's.
var (
	startPriority  = ptr.To(10)
	normalPriority = ptr.To(0)
)

// requeueIn asks for a reconcile after d, and at once for a d that has
// already passed.
func requeueIn(d time.Duration) ctrl.Result {
	return ctrl.Result{RequeueAfter: max(d, time.Millisecond), Priority: normalPriority}
}

// requeueToStart is requeueIn for the time a run may start (a slot, the
// end of a wait for a window or a jitter).
func requeueToStart(d time.Duration) ctrl.Result {
	return ctrl.Result{RequeueAfter: max(d, time.Millisecond), Priority: startPriority}
}

// Reconcile runs the phases of a RestartSchedule and writes its status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	rs := &deckhandv1alpha1.RestartSchedule{}
	if err := r.Client.Get(ctx, req.NamespacedName, rs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rs.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	orig := rs.DeepCopy()
	s := &scope{rs: rs, now: r.Clock.Now(), unlisted: unlistedOf(&rs.Status)}
	listPending(s)
	r.recordUntold(s)

	res, err := reconcileutil.Run(ctx, s, r.parseSchedule, r.observeSchedule, r.followRollouts, r.fire, r.runNow, r.startPending, r.replaceOnNeed, r.summarize)
	countPending(s)
	if err == nil && s.patchedWorkloads {
		// The status is the next reconcile's to write, evictions included.
		r.untold.put(rs.UID, s.now, s.evictions)
		return ctrl.Result{RequeueAfter: statusAfterPatchDelay, Priority: normalPriority}, nil
	}
	if err == nil {
		rs.Status.ObservedGeneration = rs.Generation
	}
	// The write is conditional on the version read: a reconcile working
	// from a stale cached copy must not overwrite history written by the
	// previous one. Workload patches made before a conflict are idempotent
	// per slot, so the retry adopts them instead of restarting again.
	written, werr := statuspatch.Writer{Client: r.Client, FieldManager: deckhandv1alpha1.FieldManager}.Status(ctx, orig, &rs.Status)
	if werr != nil || written.RequeueAfter > 0 {
		// The pods are evicted all the same: the retry records them.
		r.untold.put(rs.UID, s.now, s.evictions)
	}
	if werr != nil {
		return ctrl.Result{}, werr
	}
	if written.RequeueAfter > 0 {
		log.V(1).Info("status conflict, retrying", "restartschedule", klog.KObj(rs))
		return ctrl.Result{RequeueAfter: written.RequeueAfter, Priority: normalPriority}, nil
	}
	r.patched.forget(rs.UID)
	for _, result := range s.results {
		restartsTotal.WithLabelValues(string(result)).Inc()
	}
	for _, e := range s.events {
		r.Recorder.Eventf(rs, e.related, e.typ, e.reason, e.action, "%s", e.note)
	}
	return res, err
}
