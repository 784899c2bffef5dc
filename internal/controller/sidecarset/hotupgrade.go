package sidecarset

import (
	"context"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// Event reasons of hot upgrades.
const (
	// ReasonHotUpgradeSwitched: the idle container of a HotUpgrade sidecar
	// runs the new image and is ready; it now works, and the container that
	// worked is reset to the empty image.
	ReasonHotUpgradeSwitched = "HotUpgradeSwitched"
)

// A HotUpgrade sidecar runs as two containers in a pod: the working one
// (the pod's working-slot annotation names it) and the idle one. A hot
// upgrade takes three steps, each one patch of the pod, and everything
// that decides the next step is on the pod: the two containers' spec
// images, the idle one's status, and the annotation. A controller that
// stops between two steps therefore takes the next one when it starts
// again.
//
//  1. start:  the idle container gets the new image (in place: the kubelet
//     restarts it). Its postStart hook migrates the state from the working
//     one (the versions in SIDECARSET_VERSION and SIDECARSET_VERSION_ALT
//     tell it which is new), and it turns ready once the hook is done.
//  2. wait:   until the idle container reports the new image and ready.
//  3. switch: the annotation names the idle container as working, and the
//     container that worked is reset to the empty image, in one patch.
//
// A reset alone (the working container runs the SidecarSet's image and the
// idle one does not run the empty image) ends an upgrade that the
// SidecarSet rolled back before its switch.
type hotAction int

const (
	// hotDone: the working container has the SidecarSet's image, the idle
	// one the empty image.
	hotDone hotAction = iota
	// hotStart: the idle container is to get the SidecarSet's image.
	hotStart
	// hotWait: the idle container has the SidecarSet's image and is not
	// yet running it ready.
	hotWait
	// hotSwitch: the idle container runs the SidecarSet's image, ready:
	// it is to become the working one.
	hotSwitch
	// hotReset: the working container has the SidecarSet's image and the
	// idle one is to go back to the empty image.
	hotReset
)

// hotStep is the next step of one HotUpgrade sidecar in one pod.
type hotStep struct {
	sidecar    *deckhandv1alpha1.SidecarContainer
	work, idle string
	action     hotAction
}

// planHotUpgrade returns the next step of each HotUpgrade sidecar of s in
// pod. Sidecars whose two containers the pod does not both have (its
// record gives them to another SidecarSet, or the pod was injected before
// the sidecar existed) are left out.
func planHotUpgrade(s *deckhandv1alpha1.SidecarSet, pod *corev1.Pod) []hotStep {
	var steps []hotStep
	var working map[string]string
	for i := range s.Spec.Containers {
		sc := &s.Spec.Containers[i]
		if !sidecarcontrol.IsHotUpgrade(sc) {
			continue
		}
		if working == nil {
			working = sidecarcontrol.WorkingContainers(pod.Annotations)
		}
		work, idle := sidecarcontrol.HotUpgradeSlotsOf(sc.Name, working)
		w, d := podutil.FindContainer(pod.Spec.Containers, work), podutil.FindContainer(pod.Spec.Containers, idle)
		if w == nil || d == nil {
			continue
		}
		st := hotStep{sidecar: sc, work: work, idle: idle}
		empty := sc.UpgradeStrategy.HotUpgradeEmptyImage
		switch {
		case w.Image == sc.Image && d.Image == empty:
			st.action = hotDone
		case w.Image == sc.Image:
			st.action = hotReset
		case d.Image != sc.Image:
			st.action = hotStart
		case podutil.RunsReady(pod.Status.ContainerStatuses, idle, sc.Image):
			st.action = hotSwitch
		default:
			st.action = hotWait
		}
		steps = append(steps, st)
	}
	return steps
}

// hotProgress is what classify reads of a pod's HotUpgrade sidecars.
type hotProgress struct {
	// upgrading: some sidecar is between the start and the end of a hot
	// upgrade (its idle container does not run the empty image).
	upgrading bool
	// workingRunsLatest: the working container of every sidecar runs the
	// SidecarSet's image, ready. The pod counts as updated from the switch
	// on, while the container that worked before is still being reset.
	workingRunsLatest bool
	// stepDue: some sidecar has a step to take now (not waiting, not done).
	stepDue bool
}

// hotProgressOf reads the hot upgrades of s's HotUpgrade sidecars in pod.
func hotProgressOf(s *deckhandv1alpha1.SidecarSet, pod *corev1.Pod) hotProgress {
	out := hotProgress{workingRunsLatest: true}
	for _, st := range planHotUpgrade(s, pod) {
		if podutil.FindContainer(pod.Spec.Containers, st.idle).Image != st.sidecar.UpgradeStrategy.HotUpgradeEmptyImage {
			out.upgrading = true
		}
		w := podutil.FindContainer(pod.Spec.Containers, st.work)
		if w.Image != st.sidecar.Image || !podutil.RunsReady(pod.Status.ContainerStatuses, st.work, st.sidecar.Image) {
			out.workingRunsLatest = false
		}
		if st.action != hotDone && st.action != hotWait {
			out.stepDue = true
		}
	}
	return out
}

// applyHotUpgrade takes the steps on pod (a copy the caller patches with):
// container images, the working-slot annotation and the versions. It
// returns the steps taken (start, switch or reset).
func applyHotUpgrade(s *deckhandv1alpha1.SidecarSet, pod *corev1.Pod, steps []hotStep) []hotStep {
	var taken []hotStep
	gen := strconv.FormatInt(s.Generation, 10)
	ann := pod.Annotations
	version := func(c string) string { return deckhandv1alpha1.SidecarSetVersionAnnotationPrefix + c }
	alt := func(c string) string { return deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix + c }
	var working map[string]string
	for _, st := range steps {
		switch st.action {
		case hotStart:
			podutil.FindContainer(pod.Spec.Containers, st.idle).Image = st.sidecar.Image
			ann[version(st.idle)], ann[alt(st.idle)], ann[alt(st.work)] = gen, versionOr0(ann[version(st.work)]), gen
		case hotSwitch:
			if working == nil {
				working = sidecarcontrol.WorkingContainers(ann)
			}
			working[st.sidecar.Name] = st.idle
			podutil.FindContainer(pod.Spec.Containers, st.work).Image = st.sidecar.UpgradeStrategy.HotUpgradeEmptyImage
			ann[version(st.work)], ann[alt(st.work)], ann[alt(st.idle)] = "0", "0", "0"
		case hotReset:
			podutil.FindContainer(pod.Spec.Containers, st.idle).Image = st.sidecar.UpgradeStrategy.HotUpgradeEmptyImage
			ann[version(st.idle)], ann[alt(st.idle)], ann[alt(st.work)] = "0", "0", "0"
		default:
			continue
		}
		taken = append(taken, st)
	}
	if working != nil {
		ann[deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation] = sidecarcontrol.RenderWorkingContainers(working)
	}
	return taken
}

func versionOr0(v string) string {
	if v == "" {
		return "0"
	}
	return v
}

// hotUpgradePod takes the due steps of the HotUpgrade sidecars of a pod at
// the latest revision: a switch once the new container is ready, or a
// reset. The patch carries an optimistic lock: a cache that has not seen
// the last step yet makes it fail with a conflict instead of taking a step
// twice; the next pass decides again.
func (r *Reconciler) hotUpgradePod(ctx context.Context, sc *scope, cached *corev1.Pod) error {
	pod := cached.DeepCopy()
	taken := applyHotUpgrade(sc.set, pod, planHotUpgrade(sc.set, pod))
	if len(taken) == 0 {
		return nil
	}
	patch := client.StrategicMergeFrom(cached, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Patch(ctx, pod, patch, client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
		if apierrors.IsConflict(err) {
			return nil
		}
		return err
	}
	var switched []string
	for _, st := range taken {
		if st.action == hotSwitch {
			switched = append(switched, st.sidecar.Name+": "+st.work+" -> "+st.idle)
		}
	}
	if len(switched) > 0 {
		r.Recorder.Eventf(sc.set, pod, corev1.EventTypeNormal, ReasonHotUpgradeSwitched, "HotUpgrade",
			"pod %s/%s: the hot-upgraded containers work now (%s); the old ones are reset to the empty image",
			pod.Namespace, pod.Name, strings.Join(switched, ", "))
	}
	return nil
}
