package sidecarcontrol

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	toolscache "k8s.io/client-go/tools/cache"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// An informer hands OnDelete the object, or a tombstone holding it when the
// watch missed the deletion: both stores forget it either way.
func TestDeletedUnwrapsTombstones(t *testing.T) {
	s := &deckhandv1alpha1.SidecarSet{}
	cases := map[string]struct {
		obj  any
		want bool
	}{
		"the object":                       {obj: s, want: true},
		"a tombstone holding it":           {obj: toolscache.DeletedFinalStateUnknown{Key: "logging", Obj: s}, want: true},
		"another kind":                     {obj: &appsv1.ControllerRevision{}},
		"a tombstone holding another kind": {obj: toolscache.DeletedFinalStateUnknown{Obj: &appsv1.ControllerRevision{}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := deleted[*deckhandv1alpha1.SidecarSet](tc.obj)
			if ok != tc.want || (ok && got != s) {
				t.Errorf("deleted = %p, %v; want %p, %v", got, ok, s, tc.want)
			}
		})
	}
}
