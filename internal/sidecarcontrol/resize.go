package sidecarcontrol

import (
	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// ResizeOnly reports whether a pod injected at the image-less revision
// recordedWithoutImage can reach spec's revision by changing only images and
// the CPU and memory requests and limits of sidecar containers it runs
// (regular containers and native sidecars, the ones the pod resize
// subresource can change), and whether at least one such resource differs.
//
// The pod's own sidecar containers carry the resources of the revision they
// were injected at. Put those CPU and memory values into spec in place of
// its own, and the image-less hash of the result equals the recorded one
// exactly when nothing else differs: the hash decides, so env, mounts,
// volumes and every other field are compared as the pod webhook injected
// them. A container spec has that the pod lacks, or resources the API
// server or another webhook changed at admission, make the hashes differ:
// such a pod is recreated, never resized.
//
// runningWithoutImage is the RunningHashes image-less hash of the pod's
// revision, "" if unknown: the run-once init containers are then left out
// of the comparison, as they are of whether a pod is current.
func ResizeOnly(spec *deckhandv1alpha1.SidecarSetSpec, pod *corev1.Pod, recordedWithoutImage, runningWithoutImage string) bool {
	if recordedWithoutImage == "" {
		return false
	}
	probe := deckhandv1alpha1.SidecarSetSpec{
		InitContainers:   make([]deckhandv1alpha1.SidecarContainer, len(spec.InitContainers)),
		Containers:       make([]deckhandv1alpha1.SidecarContainer, len(spec.Containers)),
		Volumes:          spec.Volumes,
		ImagePullSecrets: spec.ImagePullSecrets,
	}
	differs := false
	for i := range spec.Containers {
		c := podutil.FindContainer(pod.Spec.Containers, spec.Containers[i].Name)
		if c == nil {
			return false
		}
		probe.Containers[i] = spec.Containers[i]
		probe.Containers[i].Resources, differs = withCPUMemoryOf(&spec.Containers[i].Resources, &c.Resources, differs)
	}
	for i := range spec.InitContainers {
		probe.InitContainers[i] = spec.InitContainers[i]
		if !podutil.IsNativeSidecar(&spec.InitContainers[i].Container) {
			continue // a plain init container has run: its resources cannot change in place
		}
		c := podutil.FindContainer(pod.Spec.InitContainers, spec.InitContainers[i].Name)
		if c == nil {
			return false
		}
		probe.InitContainers[i].Resources, differs = withCPUMemoryOf(&spec.InitContainers[i].Resources, &c.Resources, differs)
	}
	if !differs {
		return false
	}
	if _, withoutImage := Hashes(&probe); withoutImage == recordedWithoutImage {
		return true
	}
	if runningWithoutImage == "" {
		return false
	}
	_, withoutImage := RunningHashes(&probe)
	return withoutImage == runningWithoutImage
}

// withCPUMemoryOf returns want with its CPU and memory requests and limits
// replaced by have's, and differs set if they were not the same.
func withCPUMemoryOf(want, have *corev1.ResourceRequirements, differs bool) (corev1.ResourceRequirements, bool) {
	if !podutil.SameCPUMemory(want, have) {
		differs = true
	}
	out := corev1.ResourceRequirements{Claims: want.Claims}
	out.Requests = replaceCPUMemory(want.Requests, have.Requests)
	out.Limits = replaceCPUMemory(want.Limits, have.Limits)
	return out, differs
}

func replaceCPUMemory(want, have corev1.ResourceList) corev1.ResourceList {
	var out corev1.ResourceList
	set := func(k corev1.ResourceName, v corev1.ResourceList) {
		if q, ok := v[k]; ok {
			if out == nil {
				out = corev1.ResourceList{}
			}
			out[k] = q.DeepCopy()
		}
	}
	for k := range want {
		if k != corev1.ResourceCPU && k != corev1.ResourceMemory {
			set(k, want)
		}
	}
	set(corev1.ResourceCPU, have)
	set(corev1.ResourceMemory, have)
	return out
}
