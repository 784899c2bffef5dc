package podset

import (
	"context"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/podcache"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
	"github.com/deckhand-dev/deckhand/internal/revisionhistory"
)

// Event reasons, as kube-controller-manager's ReplicaSet controller uses them.
const (
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonFailedCreate     = "FailedCreate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
	ReasonFailedDelete     = "FailedDelete"
	// ReasonSuccessfulUpdate is recorded for an in-place image update.
	ReasonSuccessfulUpdate = "SuccessfulUpdate"
	// ReasonFailedUpdate is recorded when an in-place image update fails.
	ReasonFailedUpdate = "FailedUpdate"
	// ReasonSuccessfulEvict is recorded for pods a rollout evicted
	// (podReplacement Evict).
	ReasonSuccessfulEvict = "SuccessfulEvict"
	// ReasonFailedEvict is recorded when an eviction fails for another
	// reason than a PodDisruptionBudget.
	ReasonFailedEvict = "FailedEvict"
	// ReasonEvictionBlocked is recorded when a PodDisruptionBudget refused
	// evictions; they are retried later.
	ReasonEvictionBlocked = "EvictionBlocked"
)

// Reconciler reconciles PodSets.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// PodWriter writes pods. SetupWithManager makes it, when nil, from the
	// manager's configuration with podWriteTimeout as every request's
	// deadline, which the API server enforces.
	PodWriter client.Client
	// APIReader reads uncached; used to re-check a PodSet before adopting.
	APIReader client.Reader
	// Recorder records Events on PodSets.
	Recorder events.EventRecorder
	// Clock tells the time; nil means the real clock.
	Clock clock.PassiveClock
	// Expectations tracks writes the cache has not shown yet. Created by
	// SetupWithManager when nil.
	Expectations *expectations.Expectations
	// MaxConcurrentReconciles defaults to 4.
	MaxConcurrentReconciles int
	// PodCache, when set, is the informer cache pods are watched and listed
	// from instead of the manager's (tests use one fed by a deliberately
	// slow watch). Events and reads always come from the same cache, as
	// expectations require.
	PodCache cache.Cache

	// pods lists pods from PodCache or the manager's cache, as the
	// informer holds them: read-only.
	pods *podcache.Lister
	// revisionNumbers remembers the revision numbers this process gave.
	revisionNumbers revisionhistory.Counter
	// trust says whether a PodSet may act on its pod cache (cacheTrust).
	trust *cacheTrust
}

// The controller writes a PodSet's spec only to consume the rollback-to
// annotation (a JSON patch that sets the template and removes it).
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=podsets,verbs=get;list;watch;patch,roleName=manager-podset-role
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=podsets/status,verbs=patch,roleName=manager-podset-role
// Owner references with blockOwnerDeletion (set on every pod) need update on
// the owner's finalizers where OwnerReferencesPermissionEnforcement is on.
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=podsets/finalizers,verbs=update,roleName=manager-podset-role
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete;patch,roleName=manager-podset-role
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create,roleName=manager-podset-role
// The in-place update gate is a pod condition: the status subresource, patch only.
// +kubebuilder:rbac:groups="",resources=pods/status,verbs=patch,roleName=manager-podset-role
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;watch;create;patch;delete,roleName=manager-podset-role
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	reconcileutil.Defaults(mgr, "deckhand-podset",
		reconcileutil.Fields{Client: &r.Client, APIReader: &r.APIReader, Recorder: &r.Recorder, Clock: &r.Clock})
	if r.Expectations == nil {
		r.Expectations = expectations.New(expectations.WithClock(r.Clock))
	}
	if r.MaxConcurrentReconciles == 0 {
		r.MaxConcurrentReconciles = 4
	}
	if r.PodWriter == nil {
		c, err := client.New(podWriterConfig(mgr.GetConfig()), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
		if err != nil {
			return fmt.Errorf("pod writer: %w", err)
		}
		r.PodWriter = c
	}
	r.trust = newCacheTrust(r.Clock.Now())
	indexer := mgr.GetFieldIndexer()
	if r.PodCache != nil {
		indexer = r.PodCache
	}
	if err := indexer.IndexField(context.Background(), &corev1.Pod{}, podControllerIndex, podControllerKey); err != nil {
		return err
	}
	podHandler := &podEventHandler{client: r.Client, exp: r.Expectations}
	b := reconcileutil.NewController(mgr, "podset", r.MaxConcurrentReconciles, &deckhandv1alpha1.PodSet{})
	podCache := mgr.GetCache()
	if r.PodCache != nil {
		podCache = r.PodCache
		b = b.WatchesRawSource(source.Kind[client.Object](r.PodCache, &corev1.Pod{}, podHandler))
	} else {
		b = b.Watches(&corev1.Pod{}, podHandler)
	}
	pods, err := podcache.NewLister(context.Background(), podCache)
	if err != nil {
		return err
	}
	r.pods = pods
	// A ControllerRevision deleted by someone else is recreated by the
	// next sync.
	b = b.Owns(&appsv1.ControllerRevision{})
	return b.Complete(r)
}

// scope is the state one Reconcile works on.
type scope struct {
	ps       *deckhandv1alpha1.PodSet
	key      string
	selector labels.Selector
	revision string
	inPlace  string
	// pods are the active owned pods after adoption and release.
	pods []*corev1.Pod
	// terminating are owned pods being deleted.
	terminating []*corev1.Pod
	// expectationsMet is true when every write of earlier syncs had been
	// observed before the pods were read (claimPods).
	expectationsMet bool
	// synced is true when expectations allowed this sync to act.
	synced bool
	// failure is the ReplicaFailure condition to set, if any.
	failure *metav1.Condition
	// rolling is true while old-revision pods remain to be updated.
	rolling bool
	wrote   bool
	// revisions are the ControllerRevisions the PodSet controls, oldest
	// first; nil when they could not be listed.
	revisions []*appsv1.ControllerRevision
	// collisionCount is status.collisionCount as this sync settled it.
	collisionCount *int32
	// blocked names the pods whose eviction a PodDisruptionBudget refused
	// in this sync, with the API server's reason.
	blocked map[string]string
	// gates are the pods this sync's in-place updates hold out of their
	// endpoints.
	gates *gateSync
}

// replacePod puts p's successor in p's place among s.pods.
func (s *scope) replacePod(p, successor *corev1.Pod) {
	if i := slices.Index(s.pods, p); i >= 0 {
		s.pods[i] = successor
	}
}

// Reconcile brings one PodSet's pods to its spec and writes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	key := req.String()
	ps := &deckhandv1alpha1.PodSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, ps); err != nil {
		if apierrors.IsNotFound(err) {
			// The owner is gone: forget its expectations; the garbage
			// collector removes its pods.
			r.Expectations.Delete(key)
			r.revisionNumbers.Forget(key)
			r.trust.forget(key)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	sel, err := podSelector(ps)
	if err != nil {
		// Only a new spec can fix it.
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	// A rollback rewrites the template: nothing else is done on the spec
	// it replaces; the patch's own watch event starts the next sync.
	done, rollbackErr := r.rollback(ctx, ps)
	if done {
		return ctrl.Result{}, nil
	}
	s := &scope{
		ps:             ps,
		key:            key,
		selector:       sel,
		collisionCount: ps.Status.CollisionCount,
		revision:       RevisionWithCollisions(&ps.Spec.Template, ps.Status.CollisionCount),
		inPlace:        InPlaceHash(&ps.Spec.Template),
		gates:          newGateSync(),
	}

	res, err := reconcileutil.Run(ctx, s,
		// Pods are created and deleted only from a complete claim: a failed
		// list or adoption leaves s.pods short, and acting on it would
		// create pods the PodSet already has. No pod is created or updated
		// to a revision whose template is not stored first, so that every
		// revision a pod runs can be rolled back to.
		reconcileutil.StopOnError(r.syncRevisions, r.claimPods, r.managePods, r.syncInPlaceGates),
		r.truncateHistory,
		r.updateStatus,
	)
	if err = errors.Join(rollbackErr, err); err != nil {
		logger.V(1).Info("sync failed", "podset", klog.KObj(ps), "error", err)
		return ctrl.Result{}, err
	}
	return res, nil
}

// isPodSetRef reports whether ref points at a PodSet.
func isPodSetRef(ref *metav1.OwnerReference) bool {
	if ref == nil || ref.Kind != "PodSet" {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == deckhandv1alpha1.GroupVersion.Group
}

// podKey is the expectations key of a pod.
func podKey(p *corev1.Pod) string {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}.String()
}
