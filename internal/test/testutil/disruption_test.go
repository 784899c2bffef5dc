package testutil

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestUnexpectedDeletions(t *testing.T) {
	names := map[types.UID]string{"a": "pod-a", "b": "pod-b", "n": "new"}
	cases := map[string]struct {
		deleted []types.UID
		old     map[types.UID]bool
		want    []string
	}{
		"each old pod once":        {deleted: []types.UID{"a", "b"}, old: map[types.UID]bool{"a": true, "b": true}},
		"an old pod twice":         {deleted: []types.UID{"a", "b", "a"}, old: map[types.UID]bool{"a": true, "b": true}, want: []string{"pod-a"}},
		"a new pod":                {deleted: []types.UID{"a", "n"}, old: map[types.UID]bool{"a": true, "b": true}, want: []string{"new"}},
		"a new pod twice":          {deleted: []types.UID{"n", "n"}, old: map[types.UID]bool{"a": true}, want: []string{"new", "new"}},
		"any pod once, old nil":    {deleted: []types.UID{"a", "n"}},
		"any pod twice, old nil":   {deleted: []types.UID{"n", "a", "n"}, want: []string{"new"}},
		"nothing deleted, old nil": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := &DisruptionWatch{deleted: tc.deleted, names: names}
			if got := w.UnexpectedDeletions(tc.old); !slices.Equal(got, tc.want) {
				t.Errorf("UnexpectedDeletions = %q, want %q", got, tc.want)
			}
		})
	}
}
