package sidecarcontrol

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func runningSpec() *deckhandv1alpha1.SidecarSetSpec {
	return &deckhandv1alpha1.SidecarSetSpec{
		InitContainers: []deckhandv1alpha1.SidecarContainer{
			{Container: corev1.Container{Name: "setup", Image: "setup:1"}},
			{Container: corev1.Container{Name: "agent", Image: "agent:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
		},
		Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:1"}}},
	}
}

// TestRunningHashes: the running hashes leave out exactly the run-once init
// containers; the revision hash covers everything.
func TestRunningHashes(t *testing.T) {
	base := runningSpec()
	h0, wi0 := Hashes(base)
	r0, rwi0 := RunningHashes(base)
	cases := map[string]struct {
		edit func(*deckhandv1alpha1.SidecarSetSpec)
		// sameRunning, sameRunningWI: the running hashes stay.
		sameRunning, sameRunningWI bool
	}{
		"plain init image":   {func(s *deckhandv1alpha1.SidecarSetSpec) { s.InitContainers[0].Image = "setup:2" }, true, true},
		"plain init command": {func(s *deckhandv1alpha1.SidecarSetSpec) { s.InitContainers[0].Command = []string{"x"} }, true, true},
		"plain init removed": {func(s *deckhandv1alpha1.SidecarSetSpec) { s.InitContainers = s.InitContainers[1:] }, true, true},
		"native image":       {func(s *deckhandv1alpha1.SidecarSetSpec) { s.InitContainers[1].Image = "agent:2" }, false, true},
		"native env": {func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.InitContainers[1].Env = []corev1.EnvVar{{Name: "A", Value: "1"}}
		}, false, false},
		"plain made native": {func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.InitContainers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}, false, false},
		"container image": {func(s *deckhandv1alpha1.SidecarSetSpec) { s.Containers[0].Image = "proxy:2" }, false, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := runningSpec()
			tc.edit(s)
			h, wi := Hashes(s)
			r, rwi := RunningHashes(s)
			if h == h0 {
				t.Errorf("the revision hash did not change")
			}
			if (r == r0) != tc.sameRunning || (rwi == rwi0) != tc.sameRunningWI {
				t.Errorf("running hash same %v, without image same %v; want %v, %v", r == r0, rwi == rwi0, tc.sameRunning, tc.sameRunningWI)
			}
			if rwi != rwi0 && wi == wi0 {
				t.Errorf("the running image-less hash changed but the full one did not")
			}
		})
	}
	// Without plain init containers the running hashes are the revision's.
	s := runningSpec()
	s.InitContainers = s.InitContainers[1:]
	h, wi := Hashes(s)
	if r, rwi := RunningHashes(s); r != h || rwi != wi {
		t.Errorf("RunningHashes of a spec without plain init containers = %s, %s, want Hashes %s, %s", r, rwi, h, wi)
	}
}

// TestRunningRevisions: the running hashes of a SidecarSet's
// ControllerRevisions, by revision hash; a hash two revisions of different
// content carry is left out, as are other SidecarSets' revisions.
func TestRunningRevisions(t *testing.T) {
	set := &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "uid-s"}}
	cr := func(name, hash string, owner types.UID, spec *deckhandv1alpha1.SidecarSetSpec) *appsv1.ControllerRevision {
		data, err := EncodeRevision(spec)
		if err != nil {
			t.Fatal(err)
		}
		return &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
				Labels:          map[string]string{deckhandv1alpha1.SidecarSetNameLabel: "s", deckhandv1alpha1.SidecarSetRevisionLabel: hash},
				OwnerReferences: []metav1.OwnerReference{{Kind: "SidecarSet", Name: "s", UID: owner, Controller: ptr.To(true)}}},
			Data: runtime.RawExtension{Raw: data},
		}
	}
	v1 := runningSpec()
	v2 := runningSpec()
	v2.Containers[0].Image = "proxy:2"
	h1, _ := Hashes(v1)
	h2, _ := Hashes(v2)
	st := &revisionStore{bySet: map[string]map[string]*revision{}}
	st.put(cr("s-1", h1, set.UID, v1))
	st.put(cr("s-2", h2, set.UID, v2))
	st.put(cr("s-2b", h2, set.UID, v1)) // a collision
	st.put(cr("other", "ffff", "uid-other", v1))
	l := &Lister{revisions: st}

	got := l.RunningRevisions(set)
	var want RunningRevision
	want.Hash, want.WithoutImage = RunningHashes(v1)
	if len(got) != 1 || got[h1] != want {
		t.Errorf("RunningRevisions = %v, want only %s: %v", got, h1, want)
	}
	if (&Lister{}).RunningRevisions(set) != nil {
		t.Errorf("RunningRevisions without revisions is not nil")
	}
}
