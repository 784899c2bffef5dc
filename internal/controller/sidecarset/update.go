package sidecarset

import (
	"context"
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// writePods makes the reconcile's pod writes: the rollout, then the pod
// conditions. A failed update of one pod does not keep the conditions of
// the others from being written.
func (r *Reconciler) writePods(ctx context.Context, sc *scope) (ctrl.Result, error) {
	return reconcileutil.Run(ctx, sc, r.updatePods, r.syncPodConditions, r.syncInPlaceGates)
}

// disruptionRetry is how soon a pass that PodDisruptionBudgets held back
// is tried again.
const disruptionRetry = 5 * time.Second

// updatePods is one rollout pass: it plans what the strategy allows now
// (planRollout) and acts on the plan in this order: in-place updates,
// hot-upgrade steps, resize requests still to make, and, under recreate:
// Evict, evictions.
func (r *Reconciler) updatePods(ctx context.Context, sc *scope) (ctrl.Result, error) {
	us := sc.set.Spec.UpdateStrategy
	rb := r.rollbackScope(sc)
	if us.Type == deckhandv1alpha1.NotUpdateSidecarSetStrategy || us.Paused || rolloutFailed(sc.set, sc.compiled.Hash) && rb == nil || sc.pending > 0 {
		return ctrl.Result{}, nil
	}
	if rb != nil {
		// The pass moves the pods to the stable revision instead.
		sc = rb
	}
	in := sc.rolloutInput()
	budgets, err := newDisruptionBudgets(sc.pods, listDisruptionBudgets(ctx, r.Client))
	if err != nil {
		return ctrl.Result{}, err
	}
	in.budgets = budgets
	plan := planRollout(in)
	if n := len(plan.disruptionBlocked); n > 0 {
		sc.status.DisruptionBlockedPods += int32(n)
		names := blockedPodNames(plan)
		logf.FromContext(ctx).V(1).Info("PodDisruptionBudgets hold pods back", "pods", names)
		r.Recorder.Eventf(sc.set, nil, corev1.EventTypeNormal, ReasonDisruptionBlocked, "UpdatePods",
			"%d pod(s) wait for a PodDisruptionBudget to allow a disruption, first %s", n, names[0])
	}
	var out outcome
	if len(plan.disruptionBlocked) > 0 {
		// Budgets are not watched: their allowance changes with the
		// readiness of pods of any owner.
		out.retryAfter(disruptionRetry)
	}
	for _, p := range plan.inPlace {
		if r.holdForRestart(ctx, sc, p, &out) {
			continue
		}
		r.updateInPlace(ctx, sc, p, &out)
	}
	for _, p := range plan.hotUpgrade {
		out.fail(r.hotUpgradePod(ctx, sc, p.pod))
		out.retryAfter(time.Second)
	}
	for _, p := range plan.resize {
		if err := r.resizePod(ctx, sc, p, false); resizeRefused(err) {
			r.refuseResize(sc, p.pod, err)
		} else {
			out.fail(err)
		}
		out.retryAfter(time.Second)
	}
	if us.Recreate == deckhandv1alpha1.RecreateEvict {
		r.evictPods(ctx, sc, plan, &out)
	}
	return out.result()
}

// holdForRestart reports whether pod p must wait before its sidecars are
// restarted (inplacegate.MayRestart): its in-place update gate, which it
// writes False if it is not yet, has not kept the pod not Ready for the
// grace period (a pod that is not Ready, out of its endpoints already,
// waits only for that write). Everything it decides on is on the pod, so a manager that restarts in
// between carries on where this one stopped.
func (r *Reconciler) holdForRestart(ctx context.Context, sc *scope, p *podState, out *outcome) bool {
	grace := inplacegate.GracePeriod(sc.set.Spec.UpdateStrategy.InPlaceUpdateGracePeriodSeconds)
	ok, closeFirst, wait := inplacegate.MayRestart(p.pod, grace, sc.now)
	if closeFirst {
		// A closed gate makes the pod unavailable: until the cache shows
		// it, a pass would count the pod available and spend
		// maxUnavailable a second time, on another pod (the order of the
		// rollout may have changed since).
		r.memory.updates.ExpectUpdates(sc.set.Name, map[string]string{gateKey(p.pod): string(corev1.ConditionFalse)})
		closed, err := inplacegate.Close(ctx, r.Client, p.pod, gateOwner(sc.set.Name), sc.now)
		if err == nil {
			// The image patch locks on the pod's resourceVersion.
			p.pod = closed
		} else {
			r.memory.updates.UpdateAbandoned(sc.set.Name, gateKey(p.pod))
			// Not restarted with its gate open; the next pass tries again.
			ok, wait = false, time.Second
			if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				out.fail(err)
			}
		}
	}
	if ok {
		return false
	}
	if sc.held != nil {
		sc.held[p.pod.UID] = true
	}
	out.retryAfter(wait)
	return true
}

// gateKey is the update expectation key of pod's in-place update gate,
// apart from its revision's (the pod's UID); the value observed is the gate
// condition's status (inplacegate.Status).
func gateKey(pod *corev1.Pod) string { return string(pod.UID) + "/gate" }

// gateOwner is how SidecarSet name names itself on the gates it closes.
func gateOwner(name string) string { return "SidecarSet " + name }

// syncInPlaceGates opens the in-place update gate of every pod carrying
// the SidecarSet that has it closed by this SidecarSet (or not yet
// written: a new pod) and is not held in this pass, once every container
// runs its spec's image ready: an update that is over, a new pod started,
// or an update no longer planned (paused, or the revision changed back).
func (r *Reconciler) syncInPlaceGates(ctx context.Context, sc *scope) (ctrl.Result, error) {
	var out outcome
	for _, p := range sc.pods {
		if !p.injected() || p.pending || sc.held[p.pod.UID] || inplacegate.Open(p.pod) || !inplacegate.ContainersReady(p.pod) {
			continue
		}
		err := inplacegate.Release(ctx, r.Client, p.pod, gateOwner(sc.set.Name), sc.now)
		switch {
		case apierrors.IsConflict(err):
			// The pod changed since the cache's copy: look again soon.
			out.retryAfter(time.Second)
		case !apierrors.IsNotFound(err):
			out.fail(err)
		}
	}
	return out.result()
}

// updateInPlace brings pod p to the latest revision in place: its images
// patched and, for a pod behind in resources too, a resize requested.
func (r *Reconciler) updateInPlace(ctx context.Context, sc *scope, p *podState, out *outcome) {
	s, c := sc.set, sc.compiled
	resize := p.stage == stageResourcesBehind
	if resize {
		// A resize the API server would refuse (the pod's QoS class would
		// change, or it has no resize subresource) is found out before the
		// pod is moved to the new revision; the pod is then recreated.
		if err := r.resizePod(ctx, sc, p, true); err != nil {
			if resizeRefused(err) {
				r.refuseResize(sc, p.pod, err)
				out.retryAfter(time.Second)
				return
			}
			out.fail(err)
			return
		}
	}
	if err := r.updatePod(ctx, sc, p, resize); err != nil {
		podUpdates.WithLabelValues(s.Name, "error").Inc()
		r.Recorder.Eventf(s, p.pod, corev1.EventTypeWarning, ReasonUpdateFailed, "UpdatePod",
			"updating the sidecars of pod %s/%s to revision %s: %v", p.pod.Namespace, p.pod.Name, c.Hash, err)
		out.fail(err)
		return
	}
	podUpdates.WithLabelValues(s.Name, "success").Inc()
	sc.progressed()
	what := "images"
	if resize {
		what = "images and resources"
		// The pod now records the new revision and the resize annotation:
		// if this resize request is lost, the next pass makes it again.
		if err := r.resizePod(ctx, sc, p, false); resizeRefused(err) {
			r.refuseResize(sc, p.pod, err)
		}
	}
	r.Recorder.Eventf(s, p.pod, corev1.EventTypeNormal, ReasonUpdatingPod, "UpdatePod",
		"updating the sidecar %s of pod %s/%s to revision %s", what, p.pod.Namespace, p.pod.Name, c.Hash)
	out.retryAfter(time.Second)
}

// outcome collects what a pass over pods returns: the soonest retry and
// the errors, joined. A failed write to one pod does not keep the pass from
// writing the others.
type outcome struct {
	requeue time.Duration
	errs    []error
}

// retryAfter asks for another pass within d (0: no need).
func (o *outcome) retryAfter(d time.Duration) {
	if d > 0 && (o.requeue == 0 || d < o.requeue) {
		o.requeue = d
	}
}

// fail records err, if any.
func (o *outcome) fail(err error) {
	if err != nil {
		o.errs = append(o.errs, err)
	}
}

func (o *outcome) result() (ctrl.Result, error) {
	return ctrl.Result{RequeueAfter: o.requeue}, errors.Join(o.errs...)
}

// refuseResize remembers that the API server refused to resize pod to the
// latest revision, so that the pod is recreated instead (or reported).
func (r *Reconciler) refuseResize(sc *scope, pod *corev1.Pod, err error) {
	rs := &sc.memory.recreates
	rs.refuseResize(resizeKey(pod, sc.compiled.Hash))
	if rs.firstReport("resize/" + resizeKey(pod, sc.compiled.Hash)) {
		r.Recorder.Eventf(sc.set, pod, corev1.EventTypeWarning, ReasonResizeRefused, "ResizePod",
			"resizing the sidecars of pod %s/%s in place to revision %s was refused (%v): the pod needs recreating",
			pod.Namespace, pod.Name, sc.compiled.Hash, err)
	}
}

// updatePod patches the images of s's containers and native sidecars in pod
// (setSidecarImages) and records the new revision, with an optimistic lock
// on the pod's resourceVersion. With resize it also records, in the resize
// annotation, that the pod reaches the revision through a resize, which the
// caller requests next: the annotation comes first so that a pass that
// stops between the two finds the resize still to do.
func (r *Reconciler) updatePod(ctx context.Context, sc *scope, p *podState, resize bool) error {
	s, c := sc.set, sc.compiled
	cached, rec := p.pod, p.record
	if len(c.PodMetadata)+len(c.PodLabels) > 0 {
		// The cache keeps only the annotations Deckhand reads
		// (internal/podcache), not those patchPodMetadata names: the pod is
		// read from the API server, and the optimistic lock on what was
		// read makes Retain and MergePatchJson decide on the values the
		// patch applies to (labels, which the cache keeps, are read along).
		live := &corev1.Pod{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(cached), live); err != nil {
			return err
		}
		cached, rec = live, sidecarcontrol.ReadPodRecord(live.Annotations)
	}
	pod := cached.DeepCopy()
	owned := rec.Containers(s.Name)
	setSidecarImages(s, pod, owned)
	rec.Set(s.Name, c.Hash, c.HashWithoutImage, owned)
	rec.Apply(pod)
	if c.Hot != nil {
		// HotUpgrade sidecars take their first step with the new revision:
		// the idle container gets the new image (hotupgrade.go).
		applyHotUpgrade(s, pod, planHotUpgrade(s, pod))
	}
	if resize {
		withResizeAnnotation(pod, s.Name, c.Hash)
	}
	r.patchPodMetadata(sc, pod)
	patch := client.StrategicMergeFrom(cached, client.MergeFromWithOptimisticLock{})
	r.memory.updates.ExpectUpdates(s.Name, map[string]string{string(pod.UID): c.Hash})
	if err := r.Client.Patch(ctx, pod, patch, client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
		r.memory.updates.UpdateAbandoned(s.Name, string(pod.UID))
		return err
	}
	return nil
}

// setSidecarImages sets, in pod, the images of s's containers and native
// sidecars among owned (the containers the pod's record says s injected: a
// SidecarSet never changes a container it did not inject, whatever the
// names in its spec are now). A plain init container is left alone: it ran
// once and never runs again in this pod, so a new image would do nothing
// now and would run, never rolled out, the next time the pod sandbox is
// recreated (sidecarcontrol.RunningHashes).
func setSidecarImages(s *deckhandv1alpha1.SidecarSet, pod *corev1.Pod, owned []string) {
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
		if img, ok := images[pod.Spec.InitContainers[i].Name]; ok && podutil.IsNativeSidecar(&pod.Spec.InitContainers[i]) {
			pod.Spec.InitContainers[i].Image = img
		}
	}
}

// ReasonPodMetadataNotMerged: a MergePatchJson entry of patchPodMetadata
// met a pod value that is not a JSON object during an in-place update; the
// pod keeps its value.
const ReasonPodMetadataNotMerged = "PodMetadataNotMerged"

// patchPodMetadata applies the latest revision's spec.patchPodMetadata to
// pod's annotations and labels, as injection does
// (sidecarcontrol.ApplyPodMetadata), so that a pod updated in place carries
// the metadata its new sidecars expect. Keys the allowlists do not allow,
// and Deckhand's own, are not in the compiled entries.
func (r *Reconciler) patchPodMetadata(sc *scope, pod *corev1.Pod) {
	if len(sc.compiled.PodLabels) > 0 {
		if pod.Labels == nil {
			pod.Labels = map[string]string{}
		}
		sidecarcontrol.ApplyPodMetadata(sc.compiled.PodLabels, mapGetter(pod.Labels), mapSetter(pod.Labels))
	}
	if len(sc.compiled.PodMetadata) == 0 {
		return
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	for _, k := range sidecarcontrol.ApplyPodMetadata(sc.compiled.PodMetadata, mapGetter(pod.Annotations), mapSetter(pod.Annotations)) {
		r.Recorder.Eventf(sc.set, pod, corev1.EventTypeWarning, ReasonPodMetadataNotMerged, "UpdatePod",
			"SidecarSet %s did not merge into annotation %q of pod %s/%s: the pod's value is not a JSON object", sc.set.Name, k, pod.Namespace, pod.Name)
	}
}

func mapGetter(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func mapSetter(m map[string]string) func(string, string) {
	return func(k, v string) { m[k] = v }
}
