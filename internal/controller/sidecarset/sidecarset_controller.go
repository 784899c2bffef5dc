package sidecarset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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

// DefaultPodEventDelay batches pod events. A reconcile reads every pod the
// SidecarSet selects, so reconciling once per pod event costs
// O(matched pods) per pod: quadratic over a burst of pod creations, and in
// the admission benchmark (docs/benchmarks.md, item 1) this controller took
// the CPU the API server needed. Counts a second old are fine for status,
// and an in-place rollout step already waits for kubelet to restart a
// container; SidecarSet changes themselves are reconciled at once.
const DefaultPodEventDelay = time.Second

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

// podEventHandler enqueues the SidecarSets a pod event concerns after
// PodEventDelay; the queue keeps one entry per SidecarSet, so a burst of pod
// events becomes one reconcile per SidecarSet per delay.
func (r *Reconciler) podEventHandler() handler.EventHandler {
	delay := r.PodEventDelay
	if delay <= 0 {
		delay = DefaultPodEventDelay
	}
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], pods ...client.Object) {
		for _, pod := range pods {
			for _, req := range r.podToSidecarSets(ctx, pod) {
				q.AddAfter(req, delay)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
		// Both pods of an update: a SidecarSet that the pod stops matching
		// hears of it too.
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
	}
}

// podToSidecarSets maps a pod to the SidecarSets that injected it (its
// annotation) and those that select it (through the namespace index).
func (r *Reconciler) podToSidecarSets(_ context.Context, obj client.Object) []reconcile.Request {
	pod, ok := obj.(*corev1.Pod)
	if !ok || sidecarcontrol.IsProtectedNamespace(pod.Namespace) {
		return nil
	}
	seen := map[string]bool{}
	var reqs []reconcile.Request
	add := func(name string) {
		if name != "" && !seen[name] {
			seen[name] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		}
	}
	for _, name := range sidecarcontrol.InjectedNames(pod.Annotations) {
		add(name)
	}
	cands, _ := r.lister.Candidates(pod.Namespace)
	for _, s := range cands {
		if sidecarcontrol.Compile(s).Matches(s, pod.Namespace, pod.Labels, r.lister.NamespaceLabels) {
			add(s.Name)
		}
	}
	return reqs
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
			sidecarcontrol.Forget(req.Name)
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
	sc := &scope{set: set, compiled: sidecarcontrol.Compile(set)}

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
		hash, _ := sidecarcontrol.RecordedRevisions(p.Annotations, name)
		r.Expectations.UpdateObserved(name, key, hash)
	}
	for key := range want {
		r.Expectations.UpdateAbandoned(name, key)
	}
	return r.Expectations.PendingUpdates(name)
}

// computeStatus counts the pods and sets the conditions.
func (r *Reconciler) computeStatus(_ context.Context, sc *scope) (ctrl.Result, error) {
	s := sc.set
	st := deckhandv1alpha1.SidecarSetStatus{
		ObservedGeneration: s.Status.ObservedGeneration,
		LatestRevision:     sc.compiled.Hash,
		Conditions:         append([]metav1.Condition(nil), s.Status.Conditions...),
	}
	var clashes int
	var clash *podState // the first clashing pod by namespace and name, for a stable message
	for _, p := range sc.pods {
		if !p.injected {
			st.NotInjectedPods++
			if p.clash != "" {
				clashes++
				if clash == nil || podKey(p.pod) < podKey(clash.pod) {
					clash = p
				}
			}
			continue
		}
		st.MatchedPods++
		if p.ready {
			st.ReadyPods++
		}
		if p.updated && !p.pending {
			st.UpdatedPods++
			if p.ready {
				st.UpdatedReadyPods++
			}
		}
		if !p.upgradable {
			st.NotUpdatablePods++
		}
	}
	gen := s.Generation
	switch {
	case clashes > 0:
		msg := fmt.Sprintf("%d pod(s) match the selector but do not carry this SidecarSet's sidecars; %d of them already had a container named like one of its sidecars when they were created (pod %s has its own container %q), and a pod's own container wins: rename the sidecar or the pod's container, then recreate the pods",
			st.NotInjectedPods, clashes, podKey(clash.pod), clash.clash)
		if others := int(st.NotInjectedPods) - clashes; others > 0 {
			msg += fmt.Sprintf("; the other %d were created while the pod webhook was unavailable, while injection was paused, or before the SidecarSet existed: recreate them to inject them", others)
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: deckhandv1alpha1.SidecarSetConditionPodsInjected, Status: metav1.ConditionFalse, Reason: "ContainerNameConflict", ObservedGeneration: gen,
			Message: msg,
		})
	case st.NotInjectedPods > 0:
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: deckhandv1alpha1.SidecarSetConditionPodsInjected, Status: metav1.ConditionFalse, Reason: "PodsNotInjected", ObservedGeneration: gen,
			Message: fmt.Sprintf("%d pod(s) match the selector but do not carry this SidecarSet's sidecars (created while the pod webhook was unavailable, while injection was paused, or before the SidecarSet existed); recreate them to inject them", st.NotInjectedPods),
		})
	default:
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: deckhandv1alpha1.SidecarSetConditionPodsInjected, Status: metav1.ConditionTrue, Reason: "AllPodsInjected", ObservedGeneration: gen,
			Message: "every pod the SidecarSet selects carries its sidecars",
		})
	}
	if st.NotUpdatablePods > 0 {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: deckhandv1alpha1.SidecarSetConditionInPlaceUpdatable, Status: metav1.ConditionFalse, Reason: "NonImageChanges", ObservedGeneration: gen,
			Message: fmt.Sprintf("%d pod(s) carry a revision that differs from the latest in more than images; only images are updated in place, so these pods get the change only when they are recreated", st.NotUpdatablePods),
		})
	} else {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: deckhandv1alpha1.SidecarSetConditionInPlaceUpdatable, Status: metav1.ConditionTrue, Reason: "ImageOnlyChanges", ObservedGeneration: gen,
			Message: "every injected pod can reach the latest revision in place",
		})
	}
	us := s.Spec.UpdateStrategy
	cond := metav1.Condition{Type: deckhandv1alpha1.SidecarSetConditionPodsUpdated, ObservedGeneration: gen, Status: metav1.ConditionFalse}
	progress := fmt.Sprintf("%d of %d pod(s) updated", st.UpdatedPods, st.MatchedPods)
	switch {
	case st.UpdatedPods == st.MatchedPods:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "AllPodsUpdated", "every injected pod runs the latest revision"
	case us.Type == deckhandv1alpha1.NotUpdateSidecarSetStrategy:
		cond.Reason, cond.Message = "NotUpdate", progress+"; updateStrategy.type is NotUpdate, so running pods keep their revision"
	case us.Paused:
		cond.Reason, cond.Message = "UpdatePaused", progress+"; the rollout is paused (updateStrategy.paused)"
	case rolloutHeld(sc, int(st.MatchedPods)):
		cond.Reason, cond.Message = "UpdateHeld", progress+"; the remaining pods are held back by updateStrategy.partition or updateStrategy.selector, or need recreating (see InPlaceUpdatable)"
	default:
		cond.Reason, cond.Message = "RollingUpdate", progress
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	sc.status = st
	return ctrl.Result{}, nil
}

// rolloutHeld reports whether every injected pod the strategy lets the
// controller update is updated, so the rollout stands still by design.
func rolloutHeld(sc *scope, matched int) bool {
	partition := scaled(sc.set.Spec.UpdateStrategy.Partition, matched, 0)
	atLatest, movable := 0, 0
	for _, p := range sc.pods {
		if !p.injected {
			continue
		}
		if p.revisionCurrent || p.pending {
			atLatest++
			if !p.updated || p.pending {
				return false // an update is in flight
			}
			continue
		}
		if p.upgradable && p.inScope {
			movable++
		}
	}
	return movable == 0 || matched-atLatest <= partition
}

// updatePods updates the sidecar images of the pods the strategy allows.
func (r *Reconciler) updatePods(ctx context.Context, sc *scope) (ctrl.Result, error) {
	s, c := sc.set, sc.compiled
	us := s.Spec.UpdateStrategy
	if us.Type == deckhandv1alpha1.NotUpdateSidecarSetStrategy || us.Paused || sc.pending > 0 {
		return ctrl.Result{}, nil
	}
	total := int(sc.status.MatchedPods)
	maxUnavailable := scaled(us.MaxUnavailable, total, 1)
	if maxUnavailable < 1 {
		maxUnavailable = 1
	}
	partition := scaled(us.Partition, total, 0)
	plan := planUpdates(sc.pods, maxUnavailable, partition)
	var errs []error
	for _, p := range plan {
		if err := r.updatePod(ctx, sc, p.pod); err != nil {
			podUpdates.WithLabelValues(s.Name, "error").Inc()
			r.Recorder.Eventf(s, p.pod, corev1.EventTypeWarning, "UpdateFailed", "UpdatePod",
				"updating the sidecars of pod %s/%s to revision %s: %v", p.pod.Namespace, p.pod.Name, c.Hash, err)
			errs = append(errs, err)
			continue
		}
		podUpdates.WithLabelValues(s.Name, "success").Inc()
		r.Recorder.Eventf(s, p.pod, corev1.EventTypeNormal, "UpdatingPod", "UpdatePod",
			"updating the sidecar images of pod %s/%s to revision %s", p.pod.Namespace, p.pod.Name, c.Hash)
	}
	if len(plan) > 0 {
		return ctrl.Result{RequeueAfter: time.Second}, errors.Join(errs...)
	}
	return ctrl.Result{}, errors.Join(errs...)
}

// updatePod patches the images of s's containers in pod and records the new
// revision, with an optimistic lock on the pod's resourceVersion.
func (r *Reconciler) updatePod(ctx context.Context, sc *scope, cached *corev1.Pod) error {
	s, c := sc.set, sc.compiled
	pod := cached.DeepCopy()
	rec := sidecarcontrol.ParsePodRecord(pod.Annotations)
	// Only the containers the pod's record says this SidecarSet injected
	// are patched: a SidecarSet never changes a container it did not inject,
	// whatever the names in its spec are now.
	owned := rec.Hash[s.Name].Containers
	images := make(map[string]string, len(owned))
	for i := range s.Spec.Containers {
		if slices.Contains(owned, s.Spec.Containers[i].Name) {
			images[s.Spec.Containers[i].Name] = s.Spec.Containers[i].Image
		}
	}
	for i := range s.Spec.InitContainers {
		if slices.Contains(owned, s.Spec.InitContainers[i].Name) {
			images[s.Spec.InitContainers[i].Name] = s.Spec.InitContainers[i].Image
		}
	}
	for i := range pod.Spec.Containers {
		if img, ok := images[pod.Spec.Containers[i].Name]; ok {
			pod.Spec.Containers[i].Image = img
		}
	}
	for i := range pod.Spec.InitContainers {
		if img, ok := images[pod.Spec.InitContainers[i].Name]; ok {
			pod.Spec.InitContainers[i].Image = img
		}
	}
	if rec.Hash == nil {
		rec.Hash = map[string]sidecarcontrol.HashEntry{}
	}
	if rec.HashWithoutImage == nil {
		rec.HashWithoutImage = map[string]sidecarcontrol.HashWithoutImageEntry{}
	}
	entry := rec.Hash[s.Name]
	entry.Hash = c.Hash
	rec.Hash[s.Name] = entry
	rec.HashWithoutImage[s.Name] = sidecarcontrol.HashWithoutImageEntry{Hash: c.HashWithoutImage}
	injected, hash, withoutImage := rec.Annotations()
	pod.Annotations[deckhandv1alpha1.AnnotationSidecarSetInjected] = injected
	pod.Annotations[deckhandv1alpha1.AnnotationSidecarSetHash] = hash
	pod.Annotations[deckhandv1alpha1.AnnotationSidecarSetHashWithoutImage] = withoutImage
	patch := client.StrategicMergeFrom(cached, client.MergeFromWithOptimisticLock{})
	r.Expectations.ExpectUpdates(s.Name, map[string]string{string(pod.UID): c.Hash})
	if err := r.Client.Patch(ctx, pod, patch, client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
		r.Expectations.UpdateAbandoned(s.Name, string(pod.UID))
		return err
	}
	return nil
}

// writeStatus patches the status if it changed, with observedGeneration
// only when the reconcile succeeded, and emits events on condition changes.
func (r *Reconciler) writeStatus(ctx context.Context, sc *scope, ok bool) error {
	s := sc.set
	if sc.status.LatestRevision == "" {
		return nil // observePods failed before anything was computed
	}
	st := sc.status
	if ok {
		st.ObservedGeneration = s.Generation
	}
	r.recordMetrics(s.Name, &st)
	r.announce(s, &st)
	if apiequality.Semantic.DeepEqual(s.Status, st) {
		return nil
	}
	// The whole status goes in the patch: a diff would leave out the zero
	// counts a fresh SidecarSet has never had written.
	data, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return err
	}
	return r.Client.Status().Patch(ctx, s, client.RawPatch(types.MergePatchType, data), client.FieldOwner(deckhandv1alpha1.FieldManager))
}

// announce emits an event when a condition changes status or reason.
func (r *Reconciler) announce(s *deckhandv1alpha1.SidecarSet, st *deckhandv1alpha1.SidecarSetStatus) {
	for _, t := range []string{deckhandv1alpha1.SidecarSetConditionPodsInjected, deckhandv1alpha1.SidecarSetConditionPodsUpdated, deckhandv1alpha1.SidecarSetConditionInPlaceUpdatable} {
		now := meta.FindStatusCondition(st.Conditions, t)
		before := meta.FindStatusCondition(s.Status.Conditions, t)
		if now == nil || (before != nil && before.Status == now.Status && before.Reason == now.Reason) {
			continue
		}
		if before == nil && now.Status == metav1.ConditionTrue {
			continue // nothing worth saying about a SidecarSet that starts healthy
		}
		typ := corev1.EventTypeNormal
		if now.Status == metav1.ConditionFalse && now.Reason != "RollingUpdate" && now.Reason != "UpdatePaused" && now.Reason != "NotUpdate" {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(s, nil, typ, now.Reason, t, "%s", now.Message)
	}
}

func (r *Reconciler) recordMetrics(name string, st *deckhandv1alpha1.SidecarSetStatus) {
	for state, v := range map[string]int32{
		"matched": st.MatchedPods, "updated": st.UpdatedPods, "ready": st.ReadyPods, "updated_ready": st.UpdatedReadyPods,
		"not_injected": st.NotInjectedPods, "not_updatable": st.NotUpdatablePods,
	} {
		podsGauge.WithLabelValues(name, state).Set(float64(v))
	}
}

func labelSet(m map[string]string) labels.Set { return labels.Set(m) }

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
