package podset

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/eviction"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
)

// syncInput is what a sync of ps plans from: its active pods, how many
// terminate, and the update revision and its in-place hash.
func syncInput(ps *deckhandv1alpha1.PodSet, pods []*corev1.Pod, terminating int, revision, inPlaceHash string, now time.Time) planInput {
	replicas := 1
	if ps.Spec.Replicas != nil {
		replicas = int(*ps.Spec.Replicas)
	}
	in := planInput{
		replicas:    replicas,
		terminating: terminating,
		strategy:    resolveStrategy(ps.Spec.UpdateStrategy, replicas),
		paused:      ps.Spec.Paused,
		now:         now,
	}
	for _, p := range pods {
		avail, _ := isPodAvailable(p, ps.Spec.MinReadySeconds, now)
		updated := p.Labels[deckhandv1alpha1.PodSetRevisionLabel] == revision
		in.pods = append(in.pods, podView{
			pod:            p,
			updated:        updated,
			available:      avail,
			inPlaceOK:      !updated && canUpdateInPlace(p, inPlaceHash),
			updatedInPlace: updated && updatedInPlace(p),
			updating:       updated && inPlaceUpdateUnderWay(p, now, progressDeadline(ps)),
		})
	}
	return in
}

// managePods creates, deletes and updates pods toward the spec, when the
// pods claimed were read once the cache had observed the previous syncs'
// writes (expectations) and the PodSet is not being deleted.
func (r *Reconciler) managePods(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.ps.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	if !s.expectationsMet {
		skippedSyncs.Inc()
		a, d, u := r.Expectations.Pending(s.key)
		log.FromContext(ctx).V(1).Info("waiting for the cache to observe earlier writes",
			"podset", klog.KObj(s.ps), "creates", a, "deletes", d, "updates", u)
		return ctrl.Result{}, nil
	}
	if wait, err := r.confirmCache(ctx, s); err != nil || wait > 0 {
		if err == nil {
			skippedSyncs.Inc()
			log.FromContext(ctx).V(1).Info("waiting until writes of unknown outcome are settled",
				"podset", klog.KObj(s.ps), "wait", wait)
		}
		return ctrl.Result{RequeueAfter: wait}, err
	}
	s.synced = true
	replicas := 1
	if s.ps.Spec.Replicas != nil {
		replicas = int(*s.ps.Spec.Replicas)
	}
	// w is the scope the pods are written toward: s itself, or, while a
	// failed rollout rolls back, its copy on the stable revision.
	w := s
	resp := respondToFailure(s.ps, s.ps.Status.FailedRevision, s.ps.Status.StableRevision, s.revision, s.revisions)
	if resp != nil && resp.rollbackTo != nil {
		w = s.towards(resp.rollbackTo)
	}
	in := syncInput(w.ps, s.pods, len(s.terminating), w.revision, w.inPlace, r.Clock.Now())
	if resp != nil && resp.rollbackTo == nil {
		// A failed rollout is held as spec.paused would hold it.
		in.paused = true
	}
	pl := planSync(in)
	s.rolling = pl.rolling
	defer func() { s.wrote, s.failure, s.blocked = w.wrote, w.failure, w.blocked }()
	if pl.create > 0 || len(pl.delete) > 0 || len(pl.evict) > 0 || len(pl.inPlace) > 0 {
		log.FromContext(ctx).V(1).Info("syncing pods", "podset", klog.KObj(s.ps),
			"replicas", replicas, "active", len(s.pods), "terminating", len(s.terminating),
			"create", pl.create, "delete", podNames(pl.delete), "evict", podNames(pl.evict), "inPlace", len(pl.inPlace))
	}

	var errs []error
	if pl.create > 0 {
		if err := r.createPods(ctx, w, pl.create); err != nil {
			errs = append(errs, err)
		}
	}
	if len(pl.delete) > 0 {
		if err := r.deletePods(ctx, w, pl.delete); err != nil {
			errs = append(errs, err)
		}
	}
	if len(pl.inPlace) > 0 {
		if err := r.updatePodsInPlace(ctx, w, pl.inPlace); err != nil {
			errs = append(errs, err)
		}
	}
	var res ctrl.Result
	if len(pl.evict) > 0 {
		if err := r.evictPods(ctx, w, pl.evict); err != nil {
			errs = append(errs, err)
		}
		if len(w.blocked) > 0 {
			// A PodDisruptionBudget's status changes without a pod event
			// the PodSet would see (its disruption controller recomputes
			// it after the pods change): ask again later.
			res.RequeueAfter = evictionRetryInterval
		}
	}
	return res, errors.Join(errs...)
}

// evictionRetryInterval is how long a sync whose evictions a
// PodDisruptionBudget refused waits before trying again.
const evictionRetryInterval = 5 * time.Second

// evictPods evicts pods through the Eviction API, expecting each deletion
// by key first. An eviction the API server refuses because of a
// PodDisruptionBudget (429 Too Many Requests) is not an error: the pod is
// recorded in s.blocked and tried again by a later sync; nothing is ever
// forced. The eviction is UID-preconditioned, as deletes are.
func (r *Reconciler) evictPods(ctx context.Context, s *scope, pods []*corev1.Pod) error {
	r.expectDeletions(s, pods)
	var done podEventBatch
	defer done.emit(r.Recorder, s.ps, ReasonSuccessfulEvict, "Evict", "Evicted", "")
	var errs []error
	s.blocked = map[string]string{}
	sendCtx := context.WithoutCancel(ctx) // see createPods
	for _, p := range pods {
		if ctx.Err() != nil {
			r.Expectations.DeletionObserved(s.key, podKey(p))
			continue
		}
		res, err := eviction.Evict(sendCtx, r.PodWriter, p, false)
		podOps.WithLabelValues("evict", res.String()).Inc()
		if res == eviction.Evicted {
			done.add(p)
			continue
		}
		r.Expectations.DeletionObserved(s.key, podKey(p))
		r.distrustOnUnknownOutcome(s, err)
		switch res {
		case eviction.Stale:
		case eviction.Blocked:
			s.blocked[p.Name] = eviction.DisruptionMessage(err)
		default:
			r.Recorder.Eventf(s.ps, p, corev1.EventTypeWarning, ReasonFailedEvict, "Evict", "Error evicting: %v", err)
			errs = append(errs, err)
		}
	}
	if len(s.blocked) > 0 {
		names := make([]string, 0, len(s.blocked))
		for n := range s.blocked {
			names = append(names, n)
		}
		sort.Strings(names)
		r.Recorder.Eventf(s.ps, nil, corev1.EventTypeNormal, ReasonEvictionBlocked, "Evict",
			"Eviction of %d pod(s) refused, retried later: %s: %s", len(names), strings.Join(names, ", "), s.blocked[names[0]])
	}
	if len(errs) > 0 {
		s.replicaFailure(ReasonFailedEvict, errs[0])
		return fmt.Errorf("evicting pods: %w", errors.Join(errs...))
	}
	return nil
}

// newPod builds a pod from the template: generateName "<podset>-", the
// template's labels plus the revision label, a controller reference, and,
// when the PodSet updates pods in place, the in-place update gate among its
// readiness gates.
func newPod(ps *deckhandv1alpha1.PodSet, revision, inPlaceHash string) *corev1.Pod {
	t := ps.Spec.Template.DeepCopy()
	lbls := map[string]string{}
	for k, v := range t.Labels {
		lbls[k] = v
	}
	lbls[deckhandv1alpha1.PodSetRevisionLabel] = revision
	ann := map[string]string{}
	for k, v := range t.Annotations {
		ann[k] = v
	}
	ann[deckhandv1alpha1.PodSetInPlaceHashAnnotation] = inPlaceHash
	// The gate is the pod's, not the template's: it changes no revision.
	// A pod with the gate is Ready only once the controller has written
	// the gate's condition, a second API write a pod; a PodSet that never
	// updates in place has no use for it and leaves it out.
	if updatesInPlace(ps.Spec.UpdateStrategy) {
		inplacegate.Add(&t.Spec)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    ps.Name + "-",
			Namespace:       ps.Namespace,
			Labels:          lbls,
			Annotations:     ann,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{controllerRef(ps)},
		},
		Spec: t.Spec,
	}
}

// createPods creates n pods in slow-start batches, raising the creation
// expectation first and lowering it for every create that failed or was
// skipped.
func (r *Reconciler) createPods(ctx context.Context, s *scope, n int) error {
	r.Expectations.ExpectCreations(s.key, n)
	s.wrote = true
	var done podEventBatch
	defer done.emit(r.Recorder, s.ps, ReasonSuccessfulCreate, "Create", "Created", "")
	// NOTE: a pod write already sent finishes even when the manager is
	// stopping. Cancelled in flight, it could still be stored after the
	// next manager (a rolling upgrade's new replica, the new leader) had
	// listed the pods, and that manager would make it again. Stopping waits
	// for it instead (at most podWriteTimeout, the deadline the API server
	// holds it to); no new write starts once stopping has begun.
	sendCtx := context.WithoutCancel(ctx)
	created, err := slowStartBatch(n, slowStartInitialBatchSize, func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		pod := newPod(s.ps, s.revision, s.inPlace)
		err := r.PodWriter.Create(sendCtx, pod, client.FieldOwner(deckhandv1alpha1.FieldManager))
		podOps.WithLabelValues("create", result(err)).Inc()
		r.distrustOnUnknownOutcome(s, err)
		if err != nil {
			if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
				// Every create would fail; nothing worth an event or a retry.
				return err
			}
			r.Recorder.Eventf(s.ps, nil, corev1.EventTypeWarning, ReasonFailedCreate, "Create", "Error creating: %v", err)
			return err
		}
		done.add(pod)
		return nil
	})
	// NOTE: a create whose outcome is unknown may have stored its pod, or
	// may still: the PodSet no longer trusts its cache (cacheTrust) until
	// the create is settled and a consistent read shows whether it did.
	for range n - created {
		r.Expectations.CreationObserved(s.key)
	}
	if err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			return nil
		}
		if ctx.Err() != nil { // the manager is stopping: no failure of the PodSet's
			return err
		}
		s.replicaFailure(ReasonFailedCreate, err)
		return fmt.Errorf("creating pods: %w", err)
	}
	return nil
}

// deletePods deletes pods concurrently, expecting each by key first. The
// delete is UID-preconditioned so that a same-named successor is never hit.
func (r *Reconciler) deletePods(ctx context.Context, s *scope, pods []*corev1.Pod) error {
	r.expectDeletions(s, pods)
	var done podEventBatch
	defer done.emit(r.Recorder, s.ps, ReasonSuccessfulDelete, "Delete", "Deleted", "")
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	sendCtx := context.WithoutCancel(ctx) // see createPods
	for _, p := range pods {
		wg.Go(func() {
			uid := p.UID
			err := r.PodWriter.Delete(sendCtx, p, client.Preconditions{UID: &uid})
			podOps.WithLabelValues("delete", result(err)).Inc()
			if err != nil {
				r.Expectations.DeletionObserved(s.key, podKey(p))
				r.distrustOnUnknownOutcome(s, err)
				if apierrors.IsNotFound(err) {
					return
				}
				r.Recorder.Eventf(s.ps, p, corev1.EventTypeWarning, ReasonFailedDelete, "Delete", "Error deleting: %v", err)
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
				return
			}
			done.add(p)
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		err := errors.Join(errs...)
		s.replicaFailure(ReasonFailedDelete, errs[0])
		return fmt.Errorf("deleting pods: %w", err)
	}
	return nil
}

// podNames lists the names of pods, for logs.
func podNames(pods []*corev1.Pod) []string {
	names := make([]string, len(pods))
	for i, p := range pods {
		names[i] = p.Name
	}
	return names
}

// expectDeletions expects the deletion of every pod by key before the first
// is sent, so that a watch event arriving before its answer is already
// counted.
func (r *Reconciler) expectDeletions(s *scope, pods []*corev1.Pod) {
	keys := make([]string, len(pods))
	for i, p := range pods {
		keys[i] = podKey(p)
	}
	r.Expectations.ExpectDeletions(s.key, keys...)
	s.wrote = true
}

// distrustOnUnknownOutcome withdraws trust in the PodSet's pod cache when a
// pod write failed in a way that may still have stored it (see cacheTrust).
func (r *Reconciler) distrustOnUnknownOutcome(s *scope, err error) {
	if err != nil && writeOutcomeUnknown(err) {
		r.trust.distrust(s.key, r.Clock.Now())
	}
}

// replicaFailure records, for this sync's status, that pods could not be
// created, deleted or evicted: the ReplicaFailure condition with err.
func (s *scope) replicaFailure(reason string, err error) {
	s.failure = &metav1.Condition{
		Type: deckhandv1alpha1.PodSetReplicaFailureCondition, Status: metav1.ConditionTrue,
		Reason: reason, Message: err.Error(),
	}
}
