package sidecarset

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// TestClassifyCache pins when a reconcile may reuse a pod's state from the
// last one: only for the same cached Pod object (the informer replaces the
// object when the pod changes), while the SidecarSet's spec (its
// generation) is unchanged, no resize was refused and the pod is not in a
// resize; pods gone from the selection are dropped. Each case shows reuse
// or its absence by changing a Pod object in place, which the informer
// never does and only a reused state misreads.
func TestClassifyCache(t *testing.T) {
	f := newCacheFixture(1)
	var caches memory
	a, b := f.pod("a", "1", true), f.pod("b", "1", true)
	first := caches.of(f.set).classifyCache(f.set).classifyPods(f.in, []*corev1.Pod{a, b})
	if !first[0].ready || !first[1].ready || first[0].stage != stageUpdated {
		t.Fatalf("first classification: %+v %+v", *first[0], *first[1])
	}
	first[0].pending, first[0].conditionSynced = true, true
	notReady := func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse }

	t.Run("same object: state reused, pending cleared, condition check kept", func(t *testing.T) {
		notReady(a)
		got := caches.of(f.set).classifyCache(f.set).classifyPods(f.in, []*corev1.Pod{a, b})
		if !got[0].ready || got[0].pending || !got[0].conditionSynced {
			t.Errorf("reused state: ready %v (want true, from the cache), pending %v, conditionSynced %v", got[0].ready, got[0].pending, got[0].conditionSynced)
		}
	})
	t.Run("a new object: classified again, the old one forgotten", func(t *testing.T) {
		a = f.pod("a", "2", false)
		c := caches.of(f.set).classifyCache(f.set)
		got := c.classifyPods(f.in, []*corev1.Pod{a, b})
		if got[0].ready || got[0].conditionSynced || got[0].pod != a {
			t.Errorf("a changed pod: ready %v conditionSynced %v, want both false; state of the new object %v", got[0].ready, got[0].conditionSynced, got[0].pod == a)
		}
		if !got[1].ready || len(c.byPod) != 2 {
			t.Errorf("the unchanged pod: ready %v; cache holds %d objects, want 2", got[1].ready, len(c.byPod))
		}
	})
	t.Run("spec change: every pod classified again", func(t *testing.T) {
		g2 := newCacheFixture(2)
		got := caches.of(g2.set).classifyCache(g2.set).classifyPods(g2.in, []*corev1.Pod{a, b})
		if got[1].atLatest() {
			t.Error("after a new generation: at the latest revision, want not (the pod is at the old revision)")
		}
		// Back to the first spec under a new generation, as the rest expects.
		f.set.Generation = 3
		caches.of(f.set).classifyCache(f.set).classifyPods(f.in, []*corev1.Pod{a, b})
	})
	t.Run("a refused resize: every pod classified again", func(t *testing.T) {
		notReady(b)
		in := f.in
		in.resizeRefused = map[string]bool{"other/hash": true}
		got := caches.of(f.set).classifyCache(f.set).classifyPods(in, []*corev1.Pod{a, b})
		if got[1].ready {
			t.Error("with a refused resize the cached state was reused")
		}
	})
	t.Run("a pod in a resize: classified again", func(t *testing.T) {
		r := f.pod("r", "1", true)
		withResizeAnnotation(r, f.set.Name, f.in.compiled.Hash)
		c := caches.of(f.set).classifyCache(f.set)
		if got := c.classifyPods(f.in, []*corev1.Pod{r}); got[0].resize == resizeNone {
			t.Fatalf("resize = resizeNone; want a pod in a resize")
		}
		notReady(r)
		if got := c.classifyPods(f.in, []*corev1.Pod{r}); got[0].ready {
			t.Error("a resizing pod's state was reused")
		}
	})
	t.Run("pods gone are forgotten", func(t *testing.T) {
		c := caches.of(f.set).classifyCache(f.set)
		last := f.pod("c", "1", true)
		c.classifyPods(f.in, []*corev1.Pod{a, b, last})
		c.classifyPods(f.in, []*corev1.Pod{last})
		if len(c.byPod) != 1 || c.byPod[last] == nil {
			t.Errorf("cache holds %d pods, want only c", len(c.byPod))
		}
	})
	t.Run("a SidecarSet not from an API server is not cached", func(t *testing.T) {
		s := f.set.DeepCopy()
		s.UID, s.Name = "", "local"
		if c := caches.of(s).classifyCache(s); c != nil {
			t.Errorf("cache for a SidecarSet without a UID: %v", c)
		}
		got := (*classifyCache)(nil).classifyPods(f.in, []*corev1.Pod{f.pod("a", "1", true)})
		if !got[0].ready {
			t.Error("classification without a cache")
		}
	})
	t.Run("a deleted SidecarSet's cache is dropped", func(t *testing.T) {
		caches.forget(f.set.Name)
		if _, ok := caches.sets[f.set.Name]; ok {
			t.Error("cache kept after forget")
		}
	})
}

// BenchmarkClassifyPods classifies 50,000 injected pods as a reconcile
// does: afresh (no cache) and with every pod unchanged since the last
// reconcile.
func BenchmarkClassifyPods(b *testing.B) {
	f := newCacheFixture(1)
	pods := make([]*corev1.Pod, 50000)
	for i := range pods {
		pods[i] = f.pod(fmt.Sprintf("pod-%06d", i), "1", true)
	}
	b.Run("afresh", func(b *testing.B) {
		for b.Loop() {
			(*classifyCache)(nil).classifyPods(f.in, pods)
		}
	})
	b.Run("unchanged", func(b *testing.B) {
		var caches memory
		c := caches.of(f.set).classifyCache(f.set)
		c.classifyPods(f.in, pods)
		for b.Loop() {
			c.classifyPods(f.in, pods)
		}
	})
}

// A pod counts as injected only when its record names the SidecarSet and
// the pod has every container the record says it injected; a pod not
// injected is opted out only where the SidecarSet allows it.
func TestClassifyInjected(t *testing.T) {
	mk := func(allowOptOut bool) *deckhandv1alpha1.SidecarSet {
		return &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "s-uid", Generation: 1}, Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			InitContainers:    []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "init", Image: "init:1"}}},
			Containers:        []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:1"}}},
			InjectionStrategy: deckhandv1alpha1.SidecarSetInjectionStrategy{AllowOptOut: allowOptOut},
		}}
	}
	pod := func(recorded bool, skip bool, containers ...string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"}}
		for _, n := range containers {
			c := corev1.Container{Name: n, Image: n + ":1"}
			if n == "init" {
				p.Spec.InitContainers = append(p.Spec.InitContainers, c)
			} else {
				p.Spec.Containers = append(p.Spec.Containers, c)
			}
		}
		if recorded {
			recordInjection(p, "s", "h", "w", "init", "proxy")
		}
		if skip {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[deckhandv1alpha1.SidecarSetSkipInjectionAnnotation] = "true"
		}
		return p
	}
	cases := map[string]struct {
		pod                          *corev1.Pod
		allowOptOut                  bool
		injected, optedOut, recreate bool
	}{
		"recorded, with its sidecars": {pod: pod(true, false, "init", "proxy", "app"), injected: true},
		// The record lies; the container the pod has under one of the
		// SidecarSet's names is a clash, which recreateting would not resolve.
		"recorded, sidecar missing":             {pod: pod(true, false, "init", "app")},
		"recorded, init container missing":      {pod: pod(true, false, "proxy", "app")},
		"not recorded":                          {pod: pod(false, false, "app"), recreate: true},
		"skip annotation, mandatory SidecarSet": {pod: pod(false, true, "app"), recreate: true},
		"skip annotation, opting out allowed":   {pod: pod(false, true, "app"), allowOptOut: true, optedOut: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := classifyPod(classifyInputFor(mk(tc.allowOptOut)), tc.pod)
			if st.injected() != tc.injected || (st.stage == stageOptedOut) != tc.optedOut {
				t.Errorf("stage %d: injected %v optedOut %v, want %v %v", st.stage, st.injected(), st.stage == stageOptedOut, tc.injected, tc.optedOut)
			}
			if !tc.injected && st.needsRecreate() != tc.recreate {
				t.Errorf("needsRecreate %v, want %v", st.needsRecreate(), tc.recreate)
			}
		})
	}
}

// TestClassifyResize pins the resize fallback rule: a resize reached through
// the resize annotation is in progress until the kubelet reports the new
// resources; Infeasible fails at once, Deferred after deferredTimeout
// (counted from the condition's lastTransitionTime), a refused resize at
// once.
func TestClassifyResize(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := resizableSet("proxy:1")
	in := classifyInputFor(s)
	in.now, in.deferredTimeout = now, 2*time.Minute
	c := in.compiled
	pod := func(specCPU, statusCPU string, conds ...corev1.PodCondition) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "proxy", Image: "proxy:1",
				Resources: corev1.ResourceRequirements{Requests: cpu(specCPU)}}}},
			Status: corev1.PodStatus{
				Conditions: append([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, conds...),
				ContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", Image: "proxy:1", Ready: true,
					Resources: &corev1.ResourceRequirements{Requests: cpu(statusCPU)}}},
			},
		}
		recordInjection(p, "s", c.Hash, c.HashWithoutImage, "proxy")
		withResizeAnnotation(p, "s", c.Hash)
		return p
	}
	pending := func(reason string, since time.Duration) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(now.Add(-since))}
	}
	cases := map[string]struct {
		pod                         *corev1.Pod
		refused                     bool
		due, resizing, failed, done bool
	}{
		"done":                     {pod: pod("200m", "200m"), done: true},
		"kubelet not caught up":    {pod: pod("200m", "100m"), resizing: true},
		"in progress":              {pod: pod("200m", "100m", corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}), resizing: true},
		"request still to make":    {pod: pod("100m", "100m"), due: true, resizing: true},
		"infeasible":               {pod: pod("200m", "100m", pending(corev1.PodReasonInfeasible, 0)), resizing: true, failed: true},
		"deferred, within":         {pod: pod("200m", "100m", pending(corev1.PodReasonDeferred, time.Minute)), resizing: true},
		"deferred, too long":       {pod: pod("200m", "100m", pending(corev1.PodReasonDeferred, 2*time.Minute)), resizing: true, failed: true},
		"refused, request to make": {pod: pod("100m", "100m"), refused: true, due: true, resizing: true, failed: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := in
			in.resizeRefused = map[string]bool{}
			if tc.refused {
				in.resizeRefused[resizeKey(tc.pod, c.Hash)] = true
			}
			st := classifyPod(in, tc.pod)
			due, failed, done := st.resize == resizeDue, st.stage == stageResizeFailed, st.stage == stageUpdated
			if !st.atLatest() || st.resize == resizeNone || due != tc.due || st.resizing() != tc.resizing || failed != tc.failed || done != tc.done {
				t.Errorf("podState: stage %d resize %d: due %v resizing %v failed %v updated %v; want due %v resizing %v failed %v updated %v",
					st.stage, st.resize, due, st.resizing(), failed, done, tc.due, tc.resizing, tc.failed, tc.done)
			}
		})
	}
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
			in := classifyInputFor(s)
			in.running = running
			st := classifyPod(in, pod)
			current, updated, upgradable := st.atLatest(), st.stage == stageUpdated, st.injected() && !st.notUpdatable()
			if current != tc.current || updated != tc.updated || upgradable != tc.upgradable {
				t.Errorf("podState: stage %d: current %v updated %v upgradable %v; want %v %v %v",
					st.stage, current, updated, upgradable, tc.current, tc.updated, tc.upgradable)
			}
			if current && !st.unavailableToRollout() != updated {
				t.Errorf("a current pod is unavailable %v, updated %v", st.unavailableToRollout(), updated)
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
