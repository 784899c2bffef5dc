package sidecarset

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// initSet returns a SidecarSet with a plain init container (setup), a native
// sidecar (agent) and a container (proxy), all at image version 1.
func initSet() *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: deckhandv1alpha1.SidecarSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
		InitContainers: []deckhandv1alpha1.SidecarContainer{
			{Container: corev1.Container{Name: "setup", Image: "setup:1"}},
			{Container: corev1.Container{Name: "agent", Image: "agent:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
		},
		Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:1"}}},
	}}
}

// initPod returns a running, ready pod injected with s, recording s's
// revision.
func initPod(s *deckhandv1alpha1.SidecarSet) *corev1.Pod {
	hash, withoutImage := sidecarcontrol.Hashes(&s.Spec)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{s.Spec.InitContainers[0].Container, s.Spec.InitContainers[1].Container},
			Containers:     []corev1.Container{{Name: "app", Image: "app:1"}, s.Spec.Containers[0].Container},
		},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			InitContainerStatuses: []corev1.ContainerStatus{
				{Name: "setup", Image: "setup:1", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: "agent", Image: "agent:1", Ready: true},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:1", Ready: true}, {Name: "proxy", Image: "proxy:1", Ready: true}},
		},
	}
	rec := sidecarcontrol.PodRecord{}
	rec.Set(s.Name, hash, withoutImage, []string{"setup", "agent", "proxy"})
	rec.Apply(p)
	return p
}

// TestClassifyRunOnceInitContainers pins how a pod counts when the latest
// revision differs from the pod's in plain (run-once) init containers: a
// kubelet never runs one again, so such a pod is current and, its sidecars
// running, updated; a difference elsewhere still decides as before. Without
// the pod's ControllerRevision (unknown running hashes) the full hashes
// decide.
func TestClassifyRunOnceInitContainers(t *testing.T) {
	cases := map[string]struct {
		edit func(*deckhandv1alpha1.SidecarSet)
		// unknown: the pod's revision has no ControllerRevision.
		unknown                      bool
		current, updated, upgradable bool
	}{
		"nothing changed":              {edit: func(*deckhandv1alpha1.SidecarSet) {}, current: true, updated: true, upgradable: true},
		"plain init container image":   {edit: func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InitContainers[0].Image = "setup:2" }, current: true, updated: true, upgradable: true},
		"plain init container command": {edit: func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InitContainers[0].Command = []string{"/setup", "--v2"} }, current: true, updated: true, upgradable: true},
		"plain init container added": {edit: func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InitContainers = append(s.Spec.InitContainers, deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: "more", Image: "more:1"}})
		}, current: true, updated: true, upgradable: true},
		"plain init container image, revision unknown":   {edit: func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InitContainers[0].Image = "setup:2" }, unknown: true, upgradable: true},
		"plain init container command, revision unknown": {edit: func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InitContainers[0].Command = []string{"/setup", "--v2"} }, unknown: true},
		"native sidecar image":                           {edit: func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InitContainers[1].Image = "agent:2" }, upgradable: true},
		"native sidecar image and plain init command": {edit: func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InitContainers[1].Image = "agent:2"
			s.Spec.InitContainers[0].Command = []string{"/setup", "--v2"}
		}, upgradable: true},
		"container image": {edit: func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "proxy:2" }, upgradable: true},
		"container env and plain init image": {edit: func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
			s.Spec.InitContainers[0].Image = "setup:2"
		}},
		"plain init container made native": {edit: func(s *deckhandv1alpha1.SidecarSet) {
			s.Spec.InitContainers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			old := initSet()
			pod := initPod(old)
			oldHash, _ := sidecarcontrol.Hashes(&old.Spec)
			running := map[string]sidecarcontrol.RunningRevision{}
			if !tc.unknown {
				var r sidecarcontrol.RunningRevision
				r.Hash, r.WithoutImage = sidecarcontrol.RunningHashes(&old.Spec)
				running[oldHash] = r
			}
			s := initSet()
			tc.edit(s)
			c := sidecarcontrol.NewLister(toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers()), nil, sidecarcontrol.Options{}).Compiled(s)
			st := &podState{}
			classify(classifyInput{set: s, compiled: c, now: time.Now(), deferredTimeout: time.Minute, running: running}, pod, st)
			current, updated, upgradable := st.atLatest(), st.stage == stageUpdated, st.injected() && !st.notUpdatable()
			if current != tc.current || updated != tc.updated || upgradable != tc.upgradable {
				t.Errorf("podState: stage %d: current %v updated %v upgradable %v; want %v %v %v",
					st.stage, current, updated, upgradable, tc.current, tc.updated, tc.upgradable)
			}
			if current && !st.unavailable() != updated {
				t.Errorf("a current pod is unavailable %v, updated %v", st.unavailable(), updated)
			}
		})
	}
}

// TestSetSidecarImages: an in-place update sets the images of the owned
// containers and native sidecars and never of a plain init container, which
// will not run again.
func TestSetSidecarImages(t *testing.T) {
	s := initSet()
	pod := initPod(s)
	s.Spec.InitContainers[0].Image = "setup:2"
	s.Spec.InitContainers[1].Image = "agent:2"
	s.Spec.Containers[0].Image = "proxy:2"
	// The pod's own container of a sidecar's name, which s did not inject.
	pod.Spec.Containers[0].Name = "mine"
	s.Spec.Containers = append(s.Spec.Containers, deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: "mine", Image: "mine:2"}})

	setSidecarImages(s, pod, []string{"setup", "agent", "proxy"})
	want := map[string]string{"setup": "setup:1", "agent": "agent:2", "proxy": "proxy:2", "mine": "app:1"}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.Image != want[c.Name] {
				t.Errorf("container %s: image %s, want %s", c.Name, c.Image, want[c.Name])
			}
		}
	}
}
