package sidecarset

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// Reconciler computes SidecarSet status from the cache and rolls sidecar
// image changes out to injected pods in place.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder

	// PodEventDelay is how long a pod event waits in the queue before its
	// SidecarSets reconcile (default DefaultPodEventDelay). Every event that
	// arrives meanwhile joins the same reconcile.
	PodEventDelay time.Duration

	// Expectations remembers the pods the controller updated until its
	// cache shows them at the new revision, keyed by SidecarSet name and
	// pod UID. Without them a pod patched a moment ago would still look
	// ready and on the old revision in the cache, and the next pass would
	// update more pods than maxUnavailable allows. An update never observed
	// stops counting after the TTL, so a lost event delays a rollout but
	// cannot hold it. Created by SetupWithManager if nil.
	Expectations *expectations.Expectations

	lister *sidecarcontrol.Lister
}

// Reads go through the informer cache (list, watch); writes are pod patches
// (in-place updates) and status patches.
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=sidecarsets,verbs=list;watch
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=sidecarsets/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Client == nil {
		r.Client = mgr.GetClient()
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("deckhand-sidecarset")
	}
	if r.Expectations == nil {
		r.Expectations = expectations.New()
	}
	lister, err := sidecarcontrol.ListerFromCache(context.Background(), mgr.GetCache())
	if err != nil {
		return err
	}
	r.lister = lister
	return ctrl.NewControllerManagedBy(mgr).
		Named("sidecarset").
		For(&deckhandv1alpha1.SidecarSet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, r.podEventHandler()).
		WithOptions(controller.Options{MaxConcurrentReconciles: 3}).
		Complete(r)
}

// scope is what one reconcile works on.
type scope struct {
	set      *deckhandv1alpha1.SidecarSet
	compiled *sidecarcontrol.Compiled
	pods     []*podState
	status   deckhandv1alpha1.SidecarSetStatus
	// pending is the number of pods updated whose update the cache has not shown yet.
	pending int
}

// Reconcile implements reconcile.Reconciler. It never branches on which
// event woke it: it lists the pods, computes status, updates what the
// strategy allows, and writes status once at the end if it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	set := &deckhandv1alpha1.SidecarSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, set); err != nil {
		if apierrors.IsNotFound(err) {
			r.Expectations.Delete(req.Name)
			forgetMetrics(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if set.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	log = log.WithValues("sidecarset", klog.KObj(set))
	ctx = logf.IntoContext(ctx, log)
	sc := &scope{set: set, compiled: r.lister.Compiled(set)}

	var result ctrl.Result
	var errs []error
	for _, phase := range []func(context.Context, *scope) (ctrl.Result, error){
		r.observePods,
		r.computeStatus,
		r.updatePods,
	} {
		res, err := phase(ctx, sc)
		if err != nil {
			errs = append(errs, err)
			break
		}
		result = lowestRequeue(result, res)
	}
	if err := r.writeStatus(ctx, sc, len(errs) == 0); err != nil {
		errs = append(errs, err)
	}
	return result, errors.Join(errs...)
}

func lowestRequeue(a, b ctrl.Result) ctrl.Result {
	if b.RequeueAfter > 0 && (a.RequeueAfter == 0 || b.RequeueAfter < a.RequeueAfter) {
		a.RequeueAfter = b.RequeueAfter
	}
	return a
}

// observePods lists the active pods the SidecarSet selects from the cache
// and classifies them.
func (r *Reconciler) observePods(ctx context.Context, sc *scope) (ctrl.Result, error) {
	s, c := sc.set, sc.compiled
	if c.Selector.Empty() {
		return ctrl.Result{}, nil
	}
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: c.Selector}, client.UnsafeDisableDeepCopy}
	if s.Spec.Namespace != "" {
		opts = append(opts, client.InNamespace(s.Spec.Namespace))
	}
	list := &corev1.PodList{}
	if err := r.Client.List(ctx, list, opts...); err != nil {
		return ctrl.Result{}, err
	}
	pods := make([]*corev1.Pod, 0, len(list.Items))
	for i := range list.Items {
		p := &list.Items[i]
		if podActive(p) && c.MatchesNamespace(s, p.Namespace, r.lister.NamespaceLabels) {
			pods = append(pods, p)
		}
	}
	pending := r.observeUpdates(s.Name, pods)
	for _, p := range pods {
		st := classify(s, c, p)
		if _, ok := pending[string(p.UID)]; ok {
			st.pending = true
			sc.pending++
		}
		sc.pods = append(sc.pods, st)
	}
	if sc.pending > 0 {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// observeUpdates lowers the SidecarSet's update expectations by what the
// cached pods show (a pod that is gone or no longer active will never show
// it) and returns the UIDs of the pods still expected at a new revision.
func (r *Reconciler) observeUpdates(name string, pods []*corev1.Pod) map[string]string {
	want := r.Expectations.PendingUpdates(name)
	if len(want) == 0 {
		return nil
	}
	for _, p := range pods {
		key := string(p.UID)
		if _, ok := want[key]; !ok {
			continue
		}
		delete(want, key)
		hash, _ := sidecarcontrol.ReadPodRecord(p.Annotations).Revisions(name)
		r.Expectations.UpdateObserved(name, key, hash)
	}
	for key := range want {
		r.Expectations.UpdateAbandoned(name, key)
	}
	return r.Expectations.PendingUpdates(name)
}

func labelSet(m map[string]string) labels.Set { return labels.Set(m) }
