package sidecarcontrol

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestUsePinned(t *testing.T) {
	canary := map[string]string{"canary": "true"}
	other := map[string]string{"canary": "false"}
	cases := map[string]struct {
		policy   deckhandv1alpha1.SidecarSetInjectRevisionPolicy
		strategy deckhandv1alpha1.SidecarSetUpdateStrategy
		matched  int32
		updated  int32
		labels   map[string]string
		want     bool
	}{
		"Always":                          {policy: deckhandv1alpha1.AlwaysInjectRevision, want: true},
		"unset policy is Always":          {want: true},
		"Always ignores the selector":     {policy: deckhandv1alpha1.AlwaysInjectRevision, strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{Selector: &metav1.LabelSelector{MatchLabels: canary}}, labels: canary, want: true},
		"Partial, paused":                 {policy: deckhandv1alpha1.PartialInjectRevision, strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{Paused: true}, want: true},
		"Partial, neither":                {policy: deckhandv1alpha1.PartialInjectRevision, want: false},
		"Partial, selected by selector":   {policy: deckhandv1alpha1.PartialInjectRevision, strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{Selector: &metav1.LabelSelector{MatchLabels: canary}}, labels: canary, want: false},
		"Partial, outside the selector":   {policy: deckhandv1alpha1.PartialInjectRevision, strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{Selector: &metav1.LabelSelector{MatchLabels: canary}}, labels: other, want: true},
		"Partial, partition not reached":  {policy: deckhandv1alpha1.PartialInjectRevision, strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{Partition: ptr.To(intstr.FromInt32(2))}, matched: 4, updated: 3, want: true},
		"Partial, partition reached":      {policy: deckhandv1alpha1.PartialInjectRevision, strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{Partition: ptr.To(intstr.FromInt32(2))}, matched: 4, updated: 2, want: false},
		"Partial, percentage rounds up":   {policy: deckhandv1alpha1.PartialInjectRevision, strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{Partition: ptr.To(intstr.FromString("30%"))}, matched: 4, updated: 3, want: true},
		"Partial, percentage reached":     {policy: deckhandv1alpha1.PartialInjectRevision, strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{Partition: ptr.To(intstr.FromString("25%"))}, matched: 4, updated: 3, want: false},
		"Partial, partition of no pods":   {policy: deckhandv1alpha1.PartialInjectRevision, strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{Partition: ptr.To(intstr.FromInt32(1))}, want: true},
		"Partial, partition 0 never pins": {policy: deckhandv1alpha1.PartialInjectRevision, strategy: deckhandv1alpha1.SidecarSetUpdateStrategy{Partition: ptr.To(intstr.FromInt32(0))}, want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &deckhandv1alpha1.SidecarSet{
				Spec: deckhandv1alpha1.SidecarSetSpec{
					UpdateStrategy:    tc.strategy,
					InjectionStrategy: deckhandv1alpha1.SidecarSetInjectionStrategy{Revision: &deckhandv1alpha1.SidecarSetInjectRevision{RevisionName: ptr.To("x"), Policy: tc.policy}},
				},
				Status: deckhandv1alpha1.SidecarSetStatus{MatchedPods: tc.matched, UpdatedPods: tc.updated},
			}
			if got := UsePinned(s, compile(s, PodMetadataAllowlists{}), tc.labels); got != tc.want {
				t.Fatalf("UsePinned = %v, want %v", got, tc.want)
			}
		})
	}
}

// revisionOf is revision number name of owner, holding one container proxy
// at image.
func revisionOf(t testing.TB, owner *deckhandv1alpha1.SidecarSet, name string, number int64, customVersion, image string) *appsv1.ControllerRevision {
	t.Helper()
	spec := &deckhandv1alpha1.SidecarSetSpec{Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: image}}}}
	hash, _ := Hashes(spec)
	cr := controllerRevision(t, owner, name, hash, spec)
	cr.Revision = number
	if customVersion != "" {
		cr.Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel] = customVersion
	}
	return cr
}

// controllerRevision is the ControllerRevision name of owner (its
// controller) holding spec under the revision label hash.
func controllerRevision(t testing.TB, owner *deckhandv1alpha1.SidecarSet, name, hash string, spec *deckhandv1alpha1.SidecarSetSpec) *appsv1.ControllerRevision {
	t.Helper()
	data, err := EncodeRevision(spec)
	if err != nil {
		t.Fatal(err)
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
			Labels:          map[string]string{deckhandv1alpha1.SidecarSetNameLabel: NameLabelValue(owner.Name), deckhandv1alpha1.SidecarSetRevisionLabel: hash},
			OwnerReferences: []metav1.OwnerReference{{Kind: "SidecarSet", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}},
		Data: runtime.RawExtension{Raw: data},
	}
}

// The store resolves pins by name and by custom version (the newest), only
// among the SidecarSet's own revisions, and Injection gives the pinned
// revision's parts, compiled once per generation.
func TestPinnedResolution(t *testing.T) {
	s := &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh", UID: "set-1", Generation: 3}}
	s.Spec.Containers = []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:3"}}}
	st := &revisionStore{bySet: map[string]map[string]*revision{}}
	stranger := &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh", UID: "set-0"}}
	st.OnAdd(revisionOf(t, s, "mesh-a", 1, "v1", "proxy:1"), false)
	st.OnAdd(revisionOf(t, s, "mesh-b", 2, "v1", "proxy:2"), false)
	st.OnAdd(revisionOf(t, stranger, "mesh-old", 9, "v1", "proxy:0"), false)
	l := &Lister{revisions: st}

	pin := func(r *deckhandv1alpha1.SidecarSetInjectRevision) *deckhandv1alpha1.SidecarSet {
		cp := *s
		cp.Spec.InjectionStrategy.Revision = r
		return &cp
	}
	if cr := l.PinnedRevision(pin(&deckhandv1alpha1.SidecarSetInjectRevision{CustomVersion: ptr.To("v1")})); cr == nil || cr.Name != "mesh-b" {
		t.Fatalf("customVersion v1 resolves to %v, want the newest of the set's own, mesh-b", cr)
	}
	if cr := l.PinnedRevision(pin(&deckhandv1alpha1.SidecarSetInjectRevision{RevisionName: ptr.To("mesh-a")})); cr == nil || cr.Name != "mesh-a" {
		t.Fatalf("revisionName mesh-a resolves to %v", cr)
	}
	if cr := l.PinnedRevision(pin(&deckhandv1alpha1.SidecarSetInjectRevision{RevisionName: ptr.To("mesh-old")})); cr != nil {
		t.Fatalf("a revision of an earlier SidecarSet of the same name resolved: %s", cr.Name)
	}
	pinned := pin(&deckhandv1alpha1.SidecarSetInjectRevision{RevisionName: ptr.To("mesh-a")})
	c := compile(pinned, PodMetadataAllowlists{})
	gotSet, gotC := l.Injection(pinned, c, nil)
	if gotSet.Spec.Containers[0].Image != "proxy:1" || gotC.Hash != l.PinnedRevision(pinned).Labels[deckhandv1alpha1.SidecarSetRevisionLabel] {
		t.Fatalf("Injection gave image %s at %s, want proxy:1 at the pinned revision's hash", gotSet.Spec.Containers[0].Image, gotC.Hash)
	}
	if gotSet.Name != s.Name || gotSet.Spec.InjectionStrategy.Revision == nil {
		t.Fatal("the pinned form lost the SidecarSet's other fields")
	}
	again, againC := l.Injection(pinned, c, nil)
	if again != gotSet || againC != gotC {
		t.Fatal("the pinned form was compiled again for the same generation")
	}
	// Deleted: the latest again.
	st.OnDelete(l.PinnedRevision(pinned))
	if gotSet, _ := l.Injection(pinned, c, nil); gotSet != pinned {
		t.Fatal("a deleted pinned revision is still injected")
	}
	// No pin: the SidecarSet itself.
	if gotSet, gotC := l.Injection(s, c, nil); gotSet != s || gotC != c {
		t.Fatal("a SidecarSet that pins nothing is not injected as itself")
	}
}

// BenchmarkInjectionPinned is what a pinned SidecarSet adds to each pod the
// webhook injects: resolving the pin and the (cached) pinned form.
func BenchmarkInjectionPinned(b *testing.B) {
	s := &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "mesh", UID: "set-1", Generation: 3}}
	s.Spec.Containers = []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:3"}}}
	st := &revisionStore{bySet: map[string]map[string]*revision{}}
	for i := range 10 {
		st.OnAdd(revisionOf(b, s, "mesh-"+string(rune('a'+i)), int64(i+1), "v1", "proxy:1"), false)
	}
	l := &Lister{revisions: st}
	s.Spec.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{CustomVersion: ptr.To("v1")}
	c := compile(s, PodMetadataAllowlists{})
	labels := map[string]string{"app": "web"}
	b.ReportAllocs()
	for b.Loop() {
		if ps, _ := l.Injection(s, c, labels); ps == s {
			b.Fatal("not pinned")
		}
	}
}

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
	other := &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "uid-other"}}
	v1 := runningSpec()
	v2 := runningSpec()
	v2.Containers[0].Image = "proxy:2"
	h1, _ := Hashes(v1)
	h2, _ := Hashes(v2)
	st := &revisionStore{bySet: map[string]map[string]*revision{}}
	st.put(controllerRevision(t, set, "s-1", h1, v1))
	st.put(controllerRevision(t, set, "s-2", h2, v2))
	st.put(controllerRevision(t, set, "s-2b", h2, v1)) // a collision
	st.put(controllerRevision(t, other, "other", "ffff", v1))
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
