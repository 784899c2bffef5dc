package podutil

import corev1 "k8s.io/api/core/v1"

// FindContainer returns the container called name in list (a pod's
// containers or init containers), nil if there is none.
func FindContainer(list []corev1.Container, name string) *corev1.Container {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// FindStatus returns the status of the container called name in statuses
// (a pod's container or init container statuses), nil if there is none.
func FindStatus(statuses []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}

// HasContainer reports whether pod has a container or init container
// called name.
func HasContainer(pod *corev1.Pod, name string) bool {
	return FindContainer(pod.Spec.Containers, name) != nil || FindContainer(pod.Spec.InitContainers, name) != nil
}

// RunsReady reports whether the status of the container called name in
// statuses (a pod's container or init container statuses) shows it
// running image (ImageMatches) and ready: what an in-place image update
// waits for. A container without a status does not.
func RunsReady(statuses []corev1.ContainerStatus, name, image string) bool {
	st := FindStatus(statuses, name)
	return st != nil && st.Ready && ImageMatches(image, *st)
}
