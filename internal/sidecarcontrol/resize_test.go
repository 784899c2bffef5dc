package sidecarcontrol

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TestResizeOnly pins which revision changes a resize can carry: CPU and
// memory of regular containers and native sidecars, with or without an
// image change, and nothing else; with the running hash of the pod's
// revision known, whatever run-once init containers changed besides.
func TestResizeOnly(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	res := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
		}
	}
	old := func() *deckhandv1alpha1.SidecarSetSpec {
		return &deckhandv1alpha1.SidecarSetSpec{
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:1", Resources: res("100m", "64Mi")}}},
			InitContainers: []deckhandv1alpha1.SidecarContainer{
				{Container: corev1.Container{Name: "agent", Image: "agent:1", RestartPolicy: &always, Resources: res("50m", "32Mi")}},
				{Container: corev1.Container{Name: "setup", Image: "setup:1"}},
			},
		}
	}
	// The pod as injected at the old revision.
	oldSpec := old()
	_, recorded := Hashes(oldSpec)
	_, running := RunningHashes(oldSpec)
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{oldSpec.InitContainers[0].Container, oldSpec.InitContainers[1].Container},
		Containers:     []corev1.Container{{Name: "app", Image: "app:1"}, oldSpec.Containers[0].Container},
	}}
	cases := map[string]struct {
		edit func(*deckhandv1alpha1.SidecarSetSpec)
		want bool
		// withRunning: the running hash of the pod's revision is known.
		withRunning bool
	}{
		"nothing changed": {func(*deckhandv1alpha1.SidecarSetSpec) {}, false, false},
		"image only":      {func(s *deckhandv1alpha1.SidecarSetSpec) { s.Containers[0].Image = "proxy:2" }, false, false},
		"cpu request":     {func(s *deckhandv1alpha1.SidecarSetSpec) { s.Containers[0].Resources = res("200m", "64Mi") }, true, false},
		"memory and image": {func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.Containers[0].Resources = res("100m", "128Mi")
			s.Containers[0].Image = "proxy:2"
		}, true, false},
		"native sidecar memory":      {func(s *deckhandv1alpha1.SidecarSetSpec) { s.InitContainers[0].Resources = res("50m", "48Mi") }, true, false},
		"same value, other spelling": {func(s *deckhandv1alpha1.SidecarSetSpec) { s.Containers[0].Resources = res("0.1", "64Mi") }, false, false},
		"resources and env": {func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.Containers[0].Resources = res("200m", "64Mi")
			s.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
		}, false, false},
		"env only": {func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
		}, false, false},
		"ephemeral storage": {func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = resource.MustParse("1Gi")
		}, false, false},
		"a container added": {func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.Containers = append(s.Containers, deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: "x", Image: "x:1"}})
		}, false, false},
		"plain init container resized": {func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.InitContainers[0].RestartPolicy = nil
			s.InitContainers[0].Resources = res("60m", "32Mi")
		}, false, false},
		"cpu request and a run-once init container's command": {func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.Containers[0].Resources = res("200m", "64Mi")
			s.InitContainers[1].Command = []string{"/setup", "--v2"}
		}, false, false},
		"cpu request and a run-once init container's command, running hash known": {func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.Containers[0].Resources = res("200m", "64Mi")
			s.InitContainers[1].Command = []string{"/setup", "--v2"}
		}, true, true},
		"env and a run-once init container's command, running hash known": {func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
			s.InitContainers[1].Command = []string{"/setup", "--v2"}
		}, false, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := old()
			tc.edit(spec)
			r := ""
			if tc.withRunning {
				r = running
			}
			if got := ResizeOnly(spec, pod, recorded, r); got != tc.want {
				t.Errorf("ResizeOnly = %v, want %v", got, tc.want)
			}
		})
	}
}
