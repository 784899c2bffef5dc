package podutil

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// ResizeState is how far the kubelet has come with a pod's in-place resize,
// as it reports it in the pod's status.
type ResizeState int

const (
	// ResizeDone: no resize is pending or in progress, and every container
	// asked about reports in containerStatuses[].resources the CPU and
	// memory its spec asks for.
	ResizeDone ResizeState = iota
	// ResizeInProgress: the kubelet accepted the resize (or has not said
	// anything yet) and is applying it.
	ResizeInProgress
	// ResizeDeferred: PodResizePending with reason Deferred: feasible on the
	// node, but not now.
	ResizeDeferred
	// ResizeInfeasible: PodResizePending with reason Infeasible: the node
	// can never give the pod what it asks for.
	ResizeInfeasible
)

// PodResizeState reads the resize status of pod for the containers (regular
// or init) named in names, and, for Deferred and Infeasible, since when the
// PodResizePending condition has said so (its lastTransitionTime).
//
// The kubelet reports a resize through the PodResizePending condition
// (reason Deferred or Infeasible) while it cannot allocate the new
// resources, the PodResizeInProgress condition while it applies them, and
// containerStatuses[].resources once the runtime runs the container with
// them. A container whose status does not report resources yet counts as
// running with none.
func PodResizeState(pod *corev1.Pod, names []string) (ResizeState, time.Time) {
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodResizePending || c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Reason {
		case corev1.PodReasonInfeasible:
			return ResizeInfeasible, c.LastTransitionTime.Time
		case corev1.PodReasonDeferred:
			return ResizeDeferred, c.LastTransitionTime.Time
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodResizeInProgress && c.Status == corev1.ConditionTrue {
			return ResizeInProgress, time.Time{}
		}
	}
	for _, name := range names {
		spec, status := containerResources(pod, name)
		if spec == nil {
			continue // the pod does not have it
		}
		if status == nil {
			status = &corev1.ResourceRequirements{} // nothing reported: right only if nothing is asked
		}
		if !SameCPUMemory(spec, status) {
			return ResizeInProgress, time.Time{}
		}
	}
	return ResizeDone, time.Time{}
}

// containerResources returns the spec resources of the container or init
// container called name and the resources its status reports (nil if none).
func containerResources(pod *corev1.Pod, name string) (spec, status *corev1.ResourceRequirements) {
	c := FindContainer(pod.Spec.InitContainers, name)
	if c == nil {
		c = FindContainer(pod.Spec.Containers, name)
	}
	if c != nil {
		spec = &c.Resources
	}
	st := FindStatus(pod.Status.InitContainerStatuses, name)
	if st == nil {
		st = FindStatus(pod.Status.ContainerStatuses, name)
	}
	if st != nil {
		status = st.Resources
	}
	return spec, status
}

// SameCPUMemory reports whether a and b ask for the same CPU and memory
// requests and limits (other resources are not resizable in place and are
// ignored). Quantities compare by value, so "1" and "1000m" are equal.
func SameCPUMemory(a, b *corev1.ResourceRequirements) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !sameQuantity(a.Requests, b.Requests, name) || !sameQuantity(a.Limits, b.Limits, name) {
			return false
		}
	}
	return true
}

func sameQuantity(a, b corev1.ResourceList, name corev1.ResourceName) bool {
	qa, oka := a[name]
	qb, okb := b[name]
	if oka != okb {
		return false
	}
	return !oka || qa.Cmp(qb) == 0
}
