package podutil

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestFindContainer(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}},
		Containers:     []corev1.Container{{Name: "app"}, {Name: "proxy", Image: "proxy:1"}},
	}}
	if c := FindContainer(pod.Spec.Containers, "proxy"); c != &pod.Spec.Containers[1] {
		t.Errorf("FindContainer(proxy) = %v, want the pod's own element", c)
	}
	if c := FindContainer(pod.Spec.Containers, "init"); c != nil {
		t.Errorf("FindContainer(init) among containers = %v, want nil", c)
	}
	for name, want := range map[string]bool{"app": true, "init": true, "other": false} {
		if got := HasContainer(pod, name); got != want {
			t.Errorf("HasContainer(%s) = %v, want %v", name, got, want)
		}
	}
}

func TestFindStatus(t *testing.T) {
	statuses := []corev1.ContainerStatus{{Name: "app"}, {Name: "proxy", Image: "proxy:1"}}
	if st := FindStatus(statuses, "proxy"); st != &statuses[1] {
		t.Errorf("FindStatus(proxy) = %v, want the pod's own element", st)
	}
	if st := FindStatus(statuses, "other"); st != nil {
		t.Errorf("FindStatus(other) = %v, want nil", st)
	}
}

func TestRunsReady(t *testing.T) {
	statuses := []corev1.ContainerStatus{
		{Name: "ready", Image: "docker.io/library/proxy:1", Ready: true},
		{Name: "starting", Image: "proxy:1"},
		{Name: "old", Image: "proxy:0", Ready: true},
	}
	cases := map[string]bool{
		"ready":    true,  // the image as the runtime normalised it
		"starting": false, // not ready yet
		"old":      false, // ready on another image
		"missing":  false, // no status at all
	}
	for name, want := range cases {
		if got := RunsReady(statuses, name, "proxy:1"); got != want {
			t.Errorf("RunsReady(%s) = %v, want %v", name, got, want)
		}
	}
}
