package sidecarset

import (
	"context"
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

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
			r.Recorder.Eventf(s, p.pod, corev1.EventTypeWarning, ReasonUpdateFailed, "UpdatePod",
				"updating the sidecars of pod %s/%s to revision %s: %v", p.pod.Namespace, p.pod.Name, c.Hash, err)
			errs = append(errs, err)
			continue
		}
		podUpdates.WithLabelValues(s.Name, "success").Inc()
		r.Recorder.Eventf(s, p.pod, corev1.EventTypeNormal, ReasonUpdatingPod, "UpdatePod",
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
	rec := sidecarcontrol.ReadPodRecord(pod.Annotations)
	// Only the containers the pod's record says this SidecarSet injected
	// are patched: a SidecarSet never changes a container it did not inject,
	// whatever the names in its spec are now.
	owned := rec.Containers(s.Name)
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
	rec.Set(s.Name, c.Hash, c.HashWithoutImage, owned)
	rec.Apply(pod)
	patch := client.StrategicMergeFrom(cached, client.MergeFromWithOptimisticLock{})
	r.Expectations.ExpectUpdates(s.Name, map[string]string{string(pod.UID): c.Hash})
	if err := r.Client.Patch(ctx, pod, patch, client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
		r.Expectations.UpdateAbandoned(s.Name, string(pod.UID))
		return err
	}
	return nil
}
