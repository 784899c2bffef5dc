package sidecarset

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// cacheFixture is a SidecarSet read from an API server (UID, generation)
// and a way to build its injected pods.
type cacheFixture struct {
	set *deckhandv1alpha1.SidecarSet
	in  classifyInput
}

func newCacheFixture(generation int64) cacheFixture {
	s := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "set-uid", Generation: generation},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: fmt.Sprintf("proxy:%d", generation),
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}}}},
		},
	}
	c := sidecarcontrol.NewLister(toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers()), nil, sidecarcontrol.Options{}).Compiled(s)
	return cacheFixture{set: s, in: classifyInput{set: s, compiled: c, now: time.Now(), deferredTimeout: time.Minute}}
}

// pod is an injected pod at the fixture's revision, Ready or not, at
// resourceVersion rv.
func (f cacheFixture) pod(uid, rv string, ready bool) *corev1.Pod {
	rec := sidecarcontrol.PodRecord{}
	rec.Set(f.set.Name, f.in.compiled.Hash, f.in.compiled.HashWithoutImage, []string{"proxy"})
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	image := f.set.Spec.Containers[0].Image
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: types.UID(uid), ResourceVersion: rv},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "proxy", Image: image}}},
		Status: corev1.PodStatus{
			Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: status}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "app:1", Ready: ready}, {Name: "proxy", Image: image, Ready: ready}},
		},
	}
	rec.Apply(p)
	return p
}

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
