package sidecarset

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/podcache"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// Event reasons of in-place sidecar updates. A condition change is
// announced with the condition's reason.
const (
	ReasonUpdatingPod  = "UpdatingPod"
	ReasonUpdateFailed = "UpdateFailed"
	// ReasonResizeRefused: the API server refused an in-place resize; the
	// pod needs recreating.
	ReasonResizeRefused = "ResizeRefused"
	// ReasonEvictingPod: a pod was evicted for its controller to recreate.
	ReasonEvictingPod = "EvictingPod"
	// ReasonEvictionBlocked: a PodDisruptionBudget refused an eviction; it
	// is tried again later.
	ReasonEvictionBlocked = "EvictionBlocked"
	// ReasonEvictionFailed: an eviction failed for another reason.
	ReasonEvictionFailed = "EvictionFailed"
	// ReasonPodNotRecreatable: a pod needs recreating but has no controller
	// owner that would recreate it.
	ReasonPodNotRecreatable = "PodNotRecreatable"
	// ReasonDisruptionBlocked: a rollout pass left ready pods on their
	// revision because a PodDisruptionBudget covering them allowed no
	// disruption; they are tried again later.
	ReasonDisruptionBlocked = "DisruptionBlocked"
)

// DefaultResizeDeferredTimeout is how long a resize the kubelet reports as
// Deferred (PodResizePending, reason Deferred) is waited for before the pod
// is recreated instead (recreate: Evict) or reported. An Infeasible resize
// is not waited for.
const DefaultResizeDeferredTimeout = 2 * time.Minute

// Reconciler computes SidecarSet status from the cache and rolls sidecar
// image changes out to injected pods in place.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// Recorder emits Events on SidecarSets.
	Recorder events.EventRecorder
	// Clock tells the time; nil means the real clock.
	Clock clock.PassiveClock

	// PodEventDelay is how long a pod event waits in the queue before its
	// SidecarSets reconcile (default DefaultPodEventDelay), or ten times the
	// SidecarSet's last reconcile if that is longer (at most 10 s). Every
	// event that arrives meanwhile joins the same reconcile.
	PodEventDelay time.Duration

	// Expectations remembers the pods the controller updated until its
	// cache shows them at the new revision, keyed by SidecarSet name and
	// pod UID. Without them a pod patched a moment ago would still look
	// ready and on the old revision in the cache, and the next pass would
	// update more pods than maxUnavailable allows. An update never observed
	// stops counting after the TTL, so a lost event delays a rollout but
	// cannot hold it. Created by SetupWithManager if nil; the reconciler's
	// memory holds it from then on.
	Expectations *expectations.Expectations

	// ResizeDeferredTimeout is how long a Deferred in-place resize is waited
	// for (default DefaultResizeDeferredTimeout).
	ResizeDeferredTimeout time.Duration

	// APIReader reads past the cache (a ControllerRevision the cache has
	// not shown yet); the manager's API reader if nil.
	APIReader client.Reader
	// memory is everything kept between reconciles, with one expiry rule.
	memory memory

	// Lister reads SidecarSets and their compiled form from the cache. Give
	// the controller the pod webhook's Lister so that a process compiles
	// each SidecarSet once; built from the manager's cache if nil.
	Lister *sidecarcontrol.Lister

	// Pods lists the pods a SidecarSet selects from the cache without
	// copying them; built from the manager's cache (or from Client when
	// there is no manager) if nil.
	Pods *podcache.Lister
}

// Reads go through the informer cache (list, watch), except a pod updated
// in place by a SidecarSet with patchPodMetadata, read (get) for the
// annotations the cache does not keep; writes are pod patches
// (in-place image updates), pod resizes (in-place resource changes),
// evictions (recreate: Evict; the API server checks PodDisruptionBudgets
// itself, so the controller never reads them) and status patches.
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=sidecarsets,verbs=list;watch,roleName=manager-sidecarset-role
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=sidecarsets/status,verbs=patch,roleName=manager-sidecarset-role
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch,roleName=manager-sidecarset-role
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch,roleName=manager-sidecarset-role
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create,roleName=manager-sidecarset-role
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch,roleName=manager-sidecarset-role
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	reconcileutil.Defaults(mgr, "deckhand-sidecarset", reconcileutil.Fields{Client: &r.Client, Recorder: &r.Recorder, Clock: &r.Clock})
	if r.Expectations == nil {
		r.Expectations = expectations.New(expectations.WithClock(r.Clock))
	}
	if r.ResizeDeferredTimeout <= 0 {
		r.ResizeDeferredTimeout = DefaultResizeDeferredTimeout
	}
	r.memory.updates = r.Expectations
	if r.Lister == nil {
		lister, err := sidecarcontrol.ListerFromCache(context.Background(), mgr.GetCache(), sidecarcontrol.Options{Revisions: mgr})
		if err != nil {
			return err
		}
		r.Lister = lister
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Pods == nil {
		pods, err := podcache.NewLister(context.Background(), mgr.GetCache())
		if err != nil {
			return err
		}
		r.Pods = pods
	}
	revisions := r.Lister.RevisionCache()
	if revisions == nil {
		return errors.New("sidecarset: the Reconciler's Lister reads no revisions (sidecarcontrol.Options.Revisions)")
	}
	// A spec change, or a change of the InjectionPolicyReady condition the
	// policy controller writes: Ready summarises it.
	changed := predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, policyConditionChanged)
	return reconcileutil.NewController(mgr, "sidecarset", 3, &deckhandv1alpha1.SidecarSet{}, changed).
		Watches(&corev1.Pod{}, r.podEventHandler()).
		WatchesRawSource(revisionSource(revisions)).
		Complete(r)
}

// scope is what one reconcile works on.
type scope struct {
	set      *deckhandv1alpha1.SidecarSet
	compiled *sidecarcontrol.Compiled
	// memory is what the reconciler keeps about the SidecarSet.
	memory *setMemory
	pods   []*podState
	status deckhandv1alpha1.SidecarSetStatus
	// now is when the reconcile started, the time of condition transitions.
	now time.Time
	// pending is the number of pods updated (or evicted) whose change the
	// cache has not shown yet.
	pending int
	// observed is what the cache shows of the pods the SidecarSet evicted
	// and of its terminating pods.
	observed observation
	// held are the pods this pass keeps out of their endpoints ahead of an
	// in-place update (holdForRestart), by UID: a pass that rolls back
	// judges the same pods anew, in a copy of the scope that shares it.
	held map[types.UID]bool
}

// Reconcile implements reconcile.Reconciler. It never branches on which
// event woke it: it lists the pods, computes status, updates what the
// strategy allows, and writes status once at the end if it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	start := time.Now()
	defer func() { r.memory.observeCost(req.Name, time.Since(start)) }()
	log := logf.FromContext(ctx)
	set := &deckhandv1alpha1.SidecarSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, set); err != nil {
		if apierrors.IsNotFound(err) {
			r.memory.forget(req.Name)
			res, err := r.dropDeletedFromPodConditions(ctx, req.Name)
			if err == nil && res.IsZero() {
				forgetMetrics(req.Name)
			}
			return res, err
		}
		return ctrl.Result{}, err
	}
	if set.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	log = log.WithValues("sidecarset", klog.KObj(set))
	ctx = logf.IntoContext(ctx, log)
	sc := &scope{set: set, compiled: r.Lister.Compiled(set), now: r.Clock.Now(), memory: r.memory.of(set), held: map[types.UID]bool{}}

	// Status and updates are computed from the pods observePods lists:
	// after a failed list they would count and roll out to no pods at all.
	res, err := reconcileutil.Run(ctx, sc, reconcileutil.StopOnError(r.observePods, r.computeStatus, r.writePods), r.syncRevisions)
	wres, werr := r.writeStatus(ctx, sc, err == nil)
	if werr != nil {
		return ctrl.Result{}, errors.Join(err, werr)
	}
	if wres.RequeueAfter > 0 && err == nil {
		// The SidecarSet changed since the read: the status is written
		// again from a fresher copy.
		return wres, nil
	}
	return res, err
}

// policyConditionChanged passes updates that change the status, reason or
// observed generation of a SidecarSet's InjectionPolicyReady condition.
var policyConditionChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	oldSet, ok1 := e.ObjectOld.(*deckhandv1alpha1.SidecarSet)
	newSet, ok2 := e.ObjectNew.(*deckhandv1alpha1.SidecarSet)
	if !ok1 || !ok2 {
		return false
	}
	before := meta.FindStatusCondition(oldSet.Status.Conditions, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition)
	after := meta.FindStatusCondition(newSet.Status.Conditions, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition)
	if before == nil || after == nil {
		return before != after
	}
	return before.Status != after.Status || before.Reason != after.Reason || before.ObservedGeneration != after.ObservedGeneration
}}
