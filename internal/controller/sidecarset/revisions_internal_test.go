package sidecarset

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestRevisionsToPrune(t *testing.T) {
	revs := func(hashes ...string) []*appsv1.ControllerRevision {
		var out []*appsv1.ControllerRevision
		for i, h := range hashes {
			out = append(out, &appsv1.ControllerRevision{
				ObjectMeta: metav1.ObjectMeta{Name: "s-" + h, Labels: map[string]string{deckhandv1alpha1.SidecarSetRevisionLabel: h}},
				Revision:   int64(i + 1),
			})
		}
		return out
	}
	set := func(keys ...string) map[string]bool {
		m := map[string]bool{}
		for _, k := range keys {
			m[k] = true
		}
		return m
	}
	cases := map[string]struct {
		revs  []*appsv1.ControllerRevision
		inUse map[string]bool
		limit int
		want  string
	}{
		"within the limit":               {revs: revs("a", "b", "c"), inUse: set("c"), limit: 3, want: "[]"},
		"oldest idle first":              {revs: revs("a", "b", "c", "d", "e", "f"), inUse: set("f"), limit: 3, want: "[s-a s-b s-c]"},
		"a pod's revision is kept":       {revs: revs("a", "b", "c", "d", "e", "f"), inUse: set("a", "f"), limit: 3, want: "[s-b s-c s-d]"},
		"a pinned revision is kept":      {revs: revs("a", "b", "c", "d"), inUse: set("d", "name/s-a"), limit: 2, want: "[s-b s-c]"},
		"in use beyond the limit stays":  {revs: revs("a", "b", "c", "d"), inUse: set("a", "b", "c", "d"), limit: 2, want: "[]"},
		"limit 0 keeps the latest":       {revs: revs("a", "b", "c"), inUse: set("c"), limit: 0, want: "[s-a s-b]"},
		"limit 1 keeps the latest":       {revs: revs("a", "b", "c"), inUse: set("c"), limit: 1, want: "[s-a s-b]"},
		"latest by name after collision": {revs: revs("a", "b"), inUse: set("zz", "name/s-b"), limit: 1, want: "[s-a]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, cr := range revisionsToPrune(tc.revs, tc.inUse, tc.limit) {
				got = append(got, cr.Name)
			}
			if s := fmt.Sprint(got); s != tc.want {
				t.Fatalf("revisionsToPrune = %s, want %s", s, tc.want)
			}
		})
	}
}
