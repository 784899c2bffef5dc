package revisionhistory

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func revisionOf(name string, owner types.UID, number int64) *appsv1.ControllerRevision {
	t := true
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Owner", Name: "o", UID: owner, Controller: &t}}},
		Revision: number,
	}
}

// clientWith is a fake client that knows apps/v1 and holds revs.
func clientWith(t *testing.T, revs ...*appsv1.ControllerRevision) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := appsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, r := range revs {
		b = b.WithObjects(r)
	}
	return b.Build()
}

// TestCreate pins how a ControllerRevision is numbered and what a taken
// name yields. The fake client stands in for the API server's create and
// get; the controllers' integration tests create them on a real one.
func TestCreate(t *testing.T) {
	ctx := context.Background()
	cl := clientWith(t, revisionOf("taken-ours", "uid", 7), revisionOf("taken-theirs", "other", 9))
	var c Counter
	revs := []*appsv1.ControllerRevision{revisionOf("a", "uid", 2), revisionOf("b", "uid", 4)}

	got, err := c.Create(ctx, cl, cl, "o", "uid", revisionOf("new", "uid", 0), revs)
	if err != nil || got == nil || got.Revision != 5 {
		t.Fatalf("Create = %v, %v; want number 5, after the highest of revs", got, err)
	}
	// The cache has not shown "new" yet: the next one is numbered after it.
	if got, err := c.Create(ctx, cl, cl, "o", "uid", revisionOf("newer", "uid", 0), revs); err != nil || got.Revision != 6 {
		t.Fatalf("Create after an unseen create = %v, %v; want number 6", got, err)
	}
	if got, err := c.Create(ctx, cl, cl, "o", "uid", revisionOf("taken-ours", "uid", 0), revs); err != nil || got == nil || got.Revision != 7 {
		t.Errorf("Create of a name the owner holds = %v, %v; want the existing one, number 7", got, err)
	}
	if got, err := c.Create(ctx, cl, cl, "o", "uid", revisionOf("taken-theirs", "uid", 0), revs); err != nil || got != nil {
		t.Errorf("Create of a name another owner holds = %v, %v; want nil (a collision)", got, err)
	}
}

// TestNewest pins when the current revision is renumbered to be the newest.
func TestNewest(t *testing.T) {
	revs := []*appsv1.ControllerRevision{revisionOf("a", "uid", 1), revisionOf("b", "uid", 3)}
	cases := map[string]struct {
		cur        *appsv1.ControllerRevision
		given      int64 // a number the Counter gave another revision, 0 for none
		want       int64
		renumbered bool
	}{
		"already the newest":           {cur: revisionOf("b", "uid", 3), want: 3},
		"back to an earlier revision":  {cur: revisionOf("a", "uid", 1), want: 4, renumbered: true},
		"a number given and not shown": {cur: revisionOf("b", "uid", 3), given: 5, want: 6, renumbered: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var c Counter
			if tc.given > 0 {
				c.Record("o", "uid", "unseen", tc.given)
			}
			got, renumbered := c.Newest("o", "uid", tc.cur, revs)
			if got != tc.want || renumbered != tc.renumbered {
				t.Errorf("Newest = %d, %v; want %d, %v", got, renumbered, tc.want, tc.renumbered)
			}
		})
	}
}

// TestPrune pins what a prune deletes: the revisions named and nothing
// else, with no error for one already gone. (The UID precondition is the API
// server's to enforce; the fake client ignores it.)
func TestPrune(t *testing.T) {
	ctx := context.Background()
	old, kept := revisionOf("old", "uid", 1), revisionOf("kept", "uid", 2)
	cl := clientWith(t, old, kept)
	gone := revisionOf("gone", "uid", 0)
	if err := Prune(ctx, cl, []*appsv1.ControllerRevision{old, gone}); err != nil {
		t.Fatalf("Prune = %v; a revision already gone is no error", err)
	}
	for name, want := range map[string]bool{"old": false, "kept": true} {
		err := cl.Get(ctx, types.NamespacedName{Namespace: "ns", Name: name}, &appsv1.ControllerRevision{})
		if exists := err == nil; exists != want {
			t.Errorf("after Prune, %s exists = %v (%v), want %v", name, exists, err, want)
		}
	}
}
