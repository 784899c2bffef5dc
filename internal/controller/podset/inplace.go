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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
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
		if cs := podutil.FindStatus(pod.Status.ContainerStatuses, c.Name); cs != nil {
			state.OldImageIDs[c.Name] = cs.ImageID
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
// how long until it becomes so. A pod whose in-place update gate is closed
// is leaving its endpoints: it is not available, even before the kubelet
// has turned its Ready condition False.
func isPodAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) (bool, time.Duration) {
	if !podutil.IsPodReady(pod) || !inPlaceUpdateDone(pod) || !inplacegate.Open(pod) {
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
// changed containers. A pod with the in-place update gate is taken out of
// its endpoints first (holdForRestart) and patched only once its gate has
// been False for the grace period.
func (r *Reconciler) updatePodsInPlace(ctx context.Context, s *scope, pods []*corev1.Pod) error {
	now := r.Clock.Now()
	pods, holdErr := r.holdForRestart(ctx, s, pods, now)
	if len(pods) == 0 {
		return holdErr
	}
	want := map[string]string{}
	for _, p := range pods {
		want[podKey(p)] = s.revision
	}
	r.Expectations.ExpectUpdates(s.key, want)
	s.wrote = true
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
	if holdErr != nil {
		errs = append(errs, holdErr)
	}
	if len(errs) > 0 {
		return fmt.Errorf("updating pods in place: %w", errors.Join(errs...))
	}
	return nil
}

// gateSync is what a sync's in-place updates tell syncInPlaceGates: the
// pods they hold out of their endpoints, and how soon the sync must run
// again for one whose grace period is running. A scope and its copy for a
// rollback share it.
type gateSync struct {
	held    map[string]bool
	requeue time.Duration
}

func newGateSync() *gateSync { return &gateSync{held: map[string]bool{}} }

func (g *gateSync) hold(p *corev1.Pod, wait time.Duration) {
	if g == nil {
		return
	}
	g.held[podKey(p)] = true
	if wait > 0 && (g.requeue == 0 || wait < g.requeue) {
		g.requeue = wait
	}
}

// holdForRestart returns the pods among pods an in-place update may
// restart now (inplacegate.MayRestart): those without the gate, those
// whose gate is False and that have been not Ready for the grace period
// since, and those not Ready (out of their endpoints already) once their
// gate is written False. Of the
// others it writes the gate False where it is not yet, and asks for the
// sync to run again when their grace period ends. Everything it decides on is on the pod, so
// a manager that restarts in between carries on where this one stopped.
func (r *Reconciler) holdForRestart(ctx context.Context, s *scope, pods []*corev1.Pod, now time.Time) ([]*corev1.Pod, error) {
	grace := inplacegate.GracePeriod(s.ps.Spec.UpdateStrategy.InPlaceUpdateGracePeriodSeconds)
	var ready []*corev1.Pod
	var errs []error
	for _, p := range pods {
		ok, closeFirst, wait := inplacegate.MayRestart(p, grace, now)
		if closeFirst {
			// A closed gate makes the pod unavailable: until the cache
			// shows it, a sync would count the pod available and spend
			// the unavailability budget a second time, on another pod
			// (the deletion order shifts as the pods age).
			r.Expectations.ExpectUpdates(s.key, map[string]string{gateKey(p): string(corev1.ConditionFalse)})
			s.wrote = true
			closed, err := inplacegate.Close(ctx, r.PodWriter, p, gateOwner(s.ps), now)
			podOps.WithLabelValues("inplace_gate", result(err)).Inc()
			if err == nil {
				// The image patch carries the pod's resourceVersion.
				s.replacePod(p, closed)
				p = closed
			} else {
				r.Expectations.UpdateAbandoned(s.key, gateKey(p))
				r.distrustOnUnknownOutcome(s, err)
				// Not restarted with its gate open; the next sync tries
				// again, on the newer pod a conflict says there is.
				ok, wait = false, time.Second
				if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
					errs = append(errs, err)
				}
			}
		}
		if ok {
			ready = append(ready, p)
			continue
		}
		s.gates.hold(p, wait)
	}
	return ready, errors.Join(errs...)
}

// gateKey is the expectation key of pod's in-place update gate, apart from
// its image patch's (podKey); the value observed is the gate condition's
// status (gateStatus).
func gateKey(pod *corev1.Pod) string { return podKey(pod) + "/gate" }

// gateStatus is the status of pod's gate condition, empty when it has none.
func gateStatus(pod *corev1.Pod) string { return string(inplacegate.Status(pod)) }

// gateOwner is how ps names itself on the gates it closes.
func gateOwner(ps *deckhandv1alpha1.PodSet) string { return "PodSet " + ps.Name }

// syncInPlaceGates opens the in-place update gate of every pod that has it
// closed (or not yet written: a new pod) and is not held for an update in
// this sync, once its containers run their spec's images and are ready: an
// update that is over, a new pod started, or an update no longer planned
// (paused, or the template changed back).
func (r *Reconciler) syncInPlaceGates(ctx context.Context, s *scope) (ctrl.Result, error) {
	now := r.Clock.Now()
	var errs []error
	for _, p := range s.pods {
		if inplacegate.Open(p) || (s.gates != nil && s.gates.held[podKey(p)]) || !inplacegate.ContainersReady(p) {
			continue
		}
		err := inplacegate.Release(ctx, r.PodWriter, p, gateOwner(s.ps), now)
		podOps.WithLabelValues("inplace_gate", result(err)).Inc()
		// A conflict: the pod changed since the cache's copy; its event
		// brings the next sync.
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	var res ctrl.Result
	if s.gates != nil {
		res.RequeueAfter = s.gates.requeue
	}
	return res, errors.Join(errs...)
}
