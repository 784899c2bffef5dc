package podset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// inPlaceUpdateState is the value of PodSetInPlaceUpdateAnnotation.
type inPlaceUpdateState struct {
	// Revision is the revision the pod was updated to.
	Revision string `json:"revision"`
	// UpdateTime is when the images were patched.
	UpdateTime metav1.Time `json:"updateTime"`
	// OldImageIDs maps each updated container to the image ID its status
	// reported before the update.
	OldImageIDs map[string]string `json:"oldImageIDs,omitempty"`
}

// canUpdateInPlace reports whether pod can reach the template by an image
// patch: it was created from a template that differs from the current one
// only in container images.
func canUpdateInPlace(pod *corev1.Pod, inPlaceHash string) bool {
	h, ok := pod.Annotations[deckhandv1alpha1.PodSetInPlaceHashAnnotation]
	return ok && h == inPlaceHash
}

// inPlacePatch returns the strategic-merge patch that moves pod to the
// template's images and revision, and the annotation state it records. The
// patch carries the pod's resourceVersion, so it fails with a conflict if
// the pod changed since it was judged.
func inPlacePatch(pod *corev1.Pod, tmpl *corev1.PodTemplateSpec, revision string, now time.Time) ([]byte, error) {
	want := map[string]string{}
	for _, c := range tmpl.Spec.Containers {
		want[c.Name] = c.Image
	}
	state := inPlaceUpdateState{Revision: revision, UpdateTime: metav1.NewTime(now), OldImageIDs: map[string]string{}}
	var containers []map[string]string
	for _, c := range pod.Spec.Containers {
		img, ok := want[c.Name]
		if !ok || img == c.Image {
			continue
		}
		containers = append(containers, map[string]string{"name": c.Name, "image": img})
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.Name == c.Name {
				state.OldImageIDs[c.Name] = cs.ImageID
			}
		}
	}
	stateJSON, err := json.Marshal(state)
	if err != nil {
		return nil, err
	}
	patch := map[string]any{
		"metadata": map[string]any{
			"resourceVersion": pod.ResourceVersion,
			"labels":          map[string]string{deckhandv1alpha1.PodSetRevisionLabel: revision},
			"annotations":     map[string]string{deckhandv1alpha1.PodSetInPlaceUpdateAnnotation: string(stateJSON)},
		},
	}
	if len(containers) > 0 {
		patch["spec"] = map[string]any{"containers": containers}
	}
	return json.Marshal(patch)
}

// updatedInPlace reports whether pod reached the revision its label names
// by an in-place update, rather than being created on it.
func updatedInPlace(pod *corev1.Pod) bool {
	_, ok := recordedInPlaceUpdate(pod)
	return ok
}

// recordedInPlaceUpdate returns the in-place update recorded on pod for the
// revision its label names; false when there is none (no annotation, one
// that does not parse, or one for another revision).
func recordedInPlaceUpdate(pod *corev1.Pod) (inPlaceUpdateState, bool) {
	var st inPlaceUpdateState
	raw, ok := pod.Annotations[deckhandv1alpha1.PodSetInPlaceUpdateAnnotation]
	if !ok || json.Unmarshal([]byte(raw), &st) != nil {
		return st, false
	}
	return st, st.Revision == pod.Labels[deckhandv1alpha1.PodSetRevisionLabel]
}

// inPlaceUpdateUnderWay reports whether pod's in-place update has not
// completed yet (inPlaceUpdateDone) but may still: it was patched less than
// deadline ago. A pod still not done after that is failing on its new images
// (a pull error, a crash loop, a probe), and counts as a broken pod rather
// than one to wait for.
func inPlaceUpdateUnderWay(pod *corev1.Pod, now time.Time, deadline time.Duration) bool {
	st, ok := recordedInPlaceUpdate(pod)
	return ok && !inPlaceUpdateDone(pod) && now.Before(st.UpdateTime.Add(deadline))
}

// inPlaceUpdateDone reports whether an in-place update recorded on pod has
// completed: every container reports its new image (podutil.ImageMatches)
// or a new image ID, and the pod is Ready again. A pod without the annotation, or whose annotation
// is for another revision than its label, has no update in progress.
func inPlaceUpdateDone(pod *corev1.Pod) bool {
	st, ok := recordedInPlaceUpdate(pod)
	if !ok {
		return true
	}
	statuses := map[string]corev1.ContainerStatus{}
	for _, cs := range pod.Status.ContainerStatuses {
		statuses[cs.Name] = cs
	}
	for _, c := range pod.Spec.Containers {
		cs, ok := statuses[c.Name]
		if !ok {
			return false
		}
		if podutil.ImageMatches(c.Image, cs) {
			continue
		}
		if old, ok := st.OldImageIDs[c.Name]; ok && old != "" && cs.ImageID != "" && cs.ImageID != old {
			continue
		}
		return false
	}
	return podutil.IsPodReady(pod)
}

// isPodAvailable reports whether pod is Ready for at least minReadySeconds
// and not in an in-place update, and, if it is Ready but not yet available,
// how long until it becomes so.
func isPodAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) (bool, time.Duration) {
	if !podutil.IsPodReady(pod) || !inPlaceUpdateDone(pod) {
		return false, 0
	}
	if minReadySeconds == 0 {
		return true, 0
	}
	readySince := podutil.PodReadyTime(pod).Time
	if readySince.IsZero() {
		return false, 0
	}
	wait := readySince.Add(time.Duration(minReadySeconds) * time.Second).Sub(now)
	if wait <= 0 {
		return true, 0
	}
	return false, wait
}

// updatePodsInPlace patches the container images (and revision label) of
// pods whose template differs from the current one only in images; the
// pod keeps its name, UID, IP and node, and the kubelet restarts the
// changed containers.
func (r *Reconciler) updatePodsInPlace(ctx context.Context, s *scope, pods []*corev1.Pod) error {
	want := map[string]string{}
	for _, p := range pods {
		want[podKey(p)] = s.revision
	}
	r.Expectations.ExpectUpdates(s.key, want)
	s.wrote = true
	now := r.Clock.Now()
	var done podEventBatch
	defer done.emit(r.Recorder, s.ps, ReasonSuccessfulUpdate, "Update", "Updated", " in place to revision "+s.revision)
	var errs []error
	sendCtx := context.WithoutCancel(ctx) // see createPods
	for _, p := range pods {
		if ctx.Err() != nil {
			r.Expectations.UpdateAbandoned(s.key, podKey(p))
			continue
		}
		patch, err := inPlacePatch(p, &s.ps.Spec.Template, s.revision, now)
		if err == nil {
			// p is the cache's: the patched pod is read into a pod of its
			// own, which this sync's status then counts.
			patched := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
			err = r.PodWriter.Patch(sendCtx, patched, client.RawPatch(types.StrategicMergePatchType, patch),
				client.FieldOwner(deckhandv1alpha1.FieldManager))
			if err == nil {
				s.replacePod(p, patched)
			}
		}
		podOps.WithLabelValues("inplace_update", result(err)).Inc()
		if err != nil {
			r.Expectations.UpdateAbandoned(s.key, podKey(p))
			r.distrustOnUnknownOutcome(s, err)
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				// Gone or changed since it was read: the next sync judges it again.
				if apierrors.IsConflict(err) {
					errs = append(errs, err)
				}
				continue
			}
			r.Recorder.Eventf(s.ps, p, corev1.EventTypeWarning, ReasonFailedUpdate, "Update", "Error updating pod in place: %v", err)
			errs = append(errs, err)
			continue
		}
		done.add(p)
	}
	if len(errs) > 0 {
		return fmt.Errorf("updating pods in place: %w", errors.Join(errs...))
	}
	return nil
}
