package sidecarset

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// podStage is where a pod stands against the SidecarSet's latest revision.
// classify finds it once per pod and reconcile; the planner, the status and
// the pod condition switch on it.
type podStage uint8

const (
	// stageNotInjected: the pod does not carry the SidecarSet's sidecars
	// and a new pod would (it was created while the pod webhook was
	// unavailable, or before the SidecarSet existed): recreating it injects
	// it. The zero stage.
	stageNotInjected podStage = iota
	// stageNameClash: not injected because the pod already had a container
	// named like one of the sidecars (podState.clash names it); a new pod
	// would clash again, so recreating it is pointless.
	stageNameClash
	// stageOptedOut: not injected, and a new pod would not be either (the
	// skip-injection annotation, or paused injection).
	stageOptedOut
	// stageImagesBehind: injected at a revision that differs from the
	// latest in images at most: updated in place.
	stageImagesBehind
	// stageResourcesBehind: injected at a revision that differs from the
	// latest in images and sidecar CPU or memory: updated in place, the
	// resources through the pod resize subresource.
	stageResourcesBehind
	// stageSpecBehind: injected at a revision that differs from the latest
	// in more than images and resources: only recreating the pod brings it
	// to the latest revision.
	stageSpecBehind
	// stageRollingOut: at the latest revision, and some sidecar does not
	// run it ready yet (the kubelet restarts it, a resize is under way, a
	// hot upgrade waits for its new container).
	stageRollingOut
	// stageResizeFailed: at the latest revision through a resize that is
	// Infeasible, Deferred for longer than the controller waits, or was
	// refused: only recreating the pod finishes it.
	stageResizeFailed
	// stageUpdated: at the latest revision, every sidecar running it ready.
	stageUpdated
)

// resizeProgress is how far the in-place resize that brought a pod to the
// latest revision has come. Once a pod reached the latest revision through
// a resize (its resize annotation names it), the controller keeps its
// sidecars' resources at the SidecarSet's.
type resizeProgress uint8

const (
	// resizeNone: the pod did not reach the latest revision through a resize.
	resizeNone resizeProgress = iota
	// resizeDone: the kubelet reports the SidecarSet's resources.
	resizeDone
	// resizeWaiting: requested; the kubelet has not reported the new
	// resources yet.
	resizeWaiting
	// resizeDue: the spec resources of a sidecar are not the SidecarSet's
	// yet: a resize request is still to be made (a pass stopped between the
	// pod patch and the resize).
	resizeDue
)

// podState is what the controller knows about one pod the SidecarSet selects.
type podState struct {
	pod *corev1.Pod
	// record is the pod's injection record, parsed once by classify.
	record sidecarcontrol.PodRecord
	stage  podStage
	// revision is the revision hash the record holds for the SidecarSet, ""
	// unless injected.
	revision string
	// clash, under stageNameClash, is the name of the pod's own container
	// that kept the pod webhook from injecting the sidecar of that name.
	clash string
	// resize is resizeNone unless the pod is at the latest revision through
	// a resize.
	resize resizeProgress

	// ready: the pod's Ready condition is True and its in-place update
	// gate is not closed (the kubelet turns Ready False only after that).
	ready bool
	// gateClosed: the pod's in-place update gate is closed: it is leaving,
	// or out of, its endpoints for an in-place update.
	gateClosed bool
	// inScope: updateStrategy.selector (if any) selects the pod.
	inScope bool
	// controlled: the pod has a controller owner that recreates an evicted
	// pod (anything but a Job).
	controlled bool
	// hotStepDue: at the latest revision, and a HotUpgrade sidecar has a
	// step to take (a switch to its new container, or a reset to the empty
	// image).
	hotStepDue bool
	// hotUpgrading: a HotUpgrade sidecar's idle container does not run the
	// empty image (a hot upgrade is under way).
	hotUpgrading bool

	// What a reconcile learnt besides the pod itself. pending: the
	// controller updated (or evicted) the pod and its cache has not caught
	// up. conditionSynced: a reconcile found the pod's SidecarSetsUpdatable
	// condition as it should be; kept with the state while neither the pod
	// nor the SidecarSet's spec changes (classifyCache), so the next
	// reconciles need not look again.
	pending, conditionSynced bool
}

// podKey is a pod's namespace/name, the order of stable messages and lists.
func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// injected reports whether the pod carries the SidecarSet's sidecars.
func (p *podState) injected() bool {
	switch p.stage {
	case stageNotInjected, stageNameClash, stageOptedOut:
		return false
	}
	return true
}

// atLatest reports whether the pod's record carries the latest revision.
func (p *podState) atLatest() bool {
	switch p.stage {
	case stageRollingOut, stageResizeFailed, stageUpdated:
		return true
	}
	return false
}

// notUpdatable reports an injected pod that cannot reach the latest
// revision in place (status.notUpdatablePods).
func (p *podState) notUpdatable() bool {
	return p.stage == stageSpecBehind || p.stage == stageResizeFailed
}

// needsRecreate reports whether only recreating the pod brings it to the
// latest revision: not injected (unless a new pod would not be injected
// either: a container name clash, the skip-injection annotation, paused
// injection), behind in more than images and resources, or a resize that
// failed.
func (p *podState) needsRecreate() bool {
	return p.stage == stageNotInjected || p.notUpdatable()
}

// recreatedByRollout reports whether a rollout recreates the pod when it
// needs recreating: only under recreate: Evict (evict), and only a pod with
// a controller owner that replaces it.
func (p *podState) recreatedByRollout(evict bool) bool { return evict && p.controlled }

// unavailableToRollout reports whether the pod uses the rollout's
// maxUnavailable budget: the rollout has touched it (it is mid-update, or
// at the latest revision, or its in-place update gate is closed) and it is
// not updated and ready. A pod the
// rollout has not reached yet does not, ready or not: whatever keeps it
// from being ready, the rollout did not cause it. The application's own
// availability is what its PodDisruptionBudgets guard, and the rollout
// consults them before it updates a ready pod.
func (p *podState) unavailableToRollout() bool {
	return p.pending || p.gateClosed || p.atLatest() && (p.stage != stageUpdated || !p.ready)
}

// resizing reports a resize towards the latest revision that the kubelet
// has not finished (status.resizingPods).
func (p *podState) resizing() bool {
	return p.resize == resizeWaiting || p.resize == resizeDue
}
