package inject

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// TestEncodedOncePerGeneration: a SidecarSet is encoded on the first pod of
// a generation and read back for every later one; a new generation is
// encoded anew, its pinned form apart from it; a deleted SidecarSet's entry
// goes when the next one is encoded.
func TestEncodedOncePerGeneration(t *testing.T) {
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers())
	l := sidecarcontrol.NewLister(idx, nil, sidecarcontrol.Options{})
	add := func(s *deckhandv1alpha1.SidecarSet) {
		t.Helper()
		if err := idx.Add(s); err != nil {
			t.Fatal(err)
		}
	}
	a := set("a", nil)
	a.UID, a.Generation = types.UID("uid-a"), 1
	add(a)
	var encs encodings

	first := encs.get(l, a, l.Compiled(a), false)
	for range 3 {
		if got := encs.get(l, a, l.Compiled(a), false); got != first {
			t.Fatal("the same generation was encoded again")
		}
	}

	a2 := a.DeepCopy()
	a2.Generation, a2.Spec.Containers[0].Image = 2, "a:2"
	add(a2)
	second := encs.get(l, a2, l.Compiled(a2), false)
	if second == first {
		t.Fatal("a new generation got the previous generation's encoding")
	}
	// The pinned form is compiled once per revision and generation by the
	// Lister: here, a's Compiled stands for it.
	pc := l.Compiled(a)
	pinned := encs.get(l, a, pc, true)
	if pinned == second || encs.get(l, a2, l.Compiled(a2), false) != second {
		t.Fatal("the pinned form and the latest one share an entry")
	}
	if encs.get(l, a, pc, true) != pinned {
		t.Fatal("the pinned form was encoded again")
	}

	if err := idx.Delete(a2); err != nil {
		t.Fatal(err)
	}
	b := set("b", nil)
	b.UID, b.Generation = types.UID("uid-b"), 1
	add(b)
	encs.get(l, b, l.Compiled(b), false)
	if _, ok := encs.byName.Load("a"); ok {
		t.Error("a deleted SidecarSet's encoding is still held after another one was encoded")
	}
	if _, ok := encs.byName.Load("b"); !ok {
		t.Error("b's encoding is not held")
	}
}
