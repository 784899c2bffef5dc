package sidecarcontrol

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func derivedTestSet(generation int64, image string) *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "logging", UID: "uid-1", Generation: generation},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "log", Image: image}}},
		},
	}
}

// TestDerivedStateFollowsInformerEvents: a Lister over a running informer,
// and no controller at all (as on a replica that is not the leader): the
// compiled form follows a SidecarSet's updates and is dropped when the
// SidecarSet is deleted, from the informer's events alone.
func TestDerivedStateFollowsInformerEvents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	src := fcache.NewFakeControllerSource()
	inf := toolscache.NewSharedIndexInformer(src, &deckhandv1alpha1.SidecarSet{}, 0, Indexers())
	l := NewLister(inf.GetIndexer(), nil, Options{})
	if _, err := inf.AddEventHandler(l.derived); err != nil {
		t.Fatal(err)
	}
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	// held waits until the store holds the SidecarSet at generation (0: not at all).
	held := func(generation int64) *Compiled {
		t.Helper()
		var c *Compiled
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			l.derived.mu.RLock()
			c = l.derived.byName["logging"]
			l.derived.mu.RUnlock()
			if generation == 0 {
				return c == nil, nil
			}
			return c != nil && c.key.generation == generation, nil
		})
		if err != nil {
			t.Fatalf("the store never held generation %d of the SidecarSet (holds %+v)", generation, c)
		}
		return c
	}

	src.Add(derivedTestSet(1, "log:1"))
	first := held(1)
	if got := l.Compiled(l.Get("logging")); got != first {
		t.Errorf("the Lister compiled again what the informer event had compiled")
	}

	src.Modify(derivedTestSet(2, "log:2"))
	second := held(2)
	if want, _ := Hashes(&derivedTestSet(2, "log:2").Spec); second.Hash != want || second.Hash == first.Hash {
		t.Errorf("after the update the store holds revision %s, want %s", second.Hash, want)
	}
	if got := l.Compiled(l.Get("logging")); got.Hash != second.Hash {
		t.Errorf("the Lister serves revision %s for the updated SidecarSet, want %s", got.Hash, second.Hash)
	}

	src.Delete(derivedTestSet(2, "log:2"))
	held(0)
}

// TestDerivedStateNeverStale: an object newer than the store's entry (its
// event not delivered yet) is compiled afresh; a late event for an older
// generation does not replace a newer entry; a SidecarSet deleted and
// created again under its name is another object.
func TestDerivedStateNeverStale(t *testing.T) {
	st := newDerivedStore(PodMetadataAllowlists{})
	v1, v2 := derivedTestSet(1, "log:1"), derivedTestSet(2, "log:2")
	st.OnAdd(v1, true)
	h2, _ := Hashes(&v2.Spec)
	if got := st.get(v2); got.Hash != h2 {
		t.Fatalf("generation 2 served revision %s, want %s", got.Hash, h2)
	}
	st.OnUpdate(nil, v1)
	if got := st.byName["logging"]; got.key.generation != 2 {
		t.Errorf("a late event for generation 1 replaced generation 2")
	}
	again := derivedTestSet(1, "log:3")
	again.UID = "uid-2"
	h3, _ := Hashes(&again.Spec)
	if got := st.get(again); got.Hash != h3 {
		t.Errorf("a SidecarSet created again under its name was served the old one's revision")
	}
	st.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "logging", Obj: v2})
	if st.len() != 1 {
		t.Errorf("deleting the old object dropped the new one's entry")
	}
	st.OnDelete(again)
	if st.len() != 0 {
		t.Errorf("the store still holds a deleted SidecarSet")
	}
	// Objects that never came from the API server (generation 0) are not kept.
	st.get(derivedTestSet(0, "log:4"))
	if st.len() != 0 {
		t.Errorf("an object without a generation was stored")
	}
}
