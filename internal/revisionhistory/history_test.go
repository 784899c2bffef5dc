package revisionhistory

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestName(t *testing.T) {
	if n := Name("web", "abc"); n != "web-abc" {
		t.Fatalf("Name = %s", n)
	}
	if n := Name(strings.Repeat("a", 300), "abc"); len(n) != maxNameLen || !strings.HasSuffix(n, "-abc") {
		t.Fatalf("Name of a long owner has %d characters (%s...), want %d ending in -abc", len(n), n[:10], maxNameLen)
	}
}

func TestOldestIdle(t *testing.T) {
	revs := []string{"a", "b", "c", "d", "e"}
	id := func(s string) string { return s }
	cases := map[string]struct {
		inUse map[string]bool
		n     int
		want  string
	}{
		"none to prune":           {n: 0, want: "[]"},
		"oldest first":            {n: 2, want: "[a b]"},
		"in use are skipped":      {inUse: map[string]bool{"a": true, "c": true}, n: 2, want: "[b d]"},
		"never more than idle":    {inUse: map[string]bool{"a": true, "b": true, "c": true, "d": true}, n: 4, want: "[e]"},
		"more than there are":     {n: 9, want: "[a b c d e]"},
		"negative prunes nothing": {n: -1, want: "[]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := fmt.Sprint(OldestIdle(revs, id, tc.inUse, tc.n))
			if got != tc.want {
				t.Fatalf("OldestIdle = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	nameFor := func(c *int32) string {
		if c == nil {
			return "x-0"
		}
		return fmt.Sprintf("x-%d", *c)
	}
	// x-0 and x-1 are taken by others; x-2 is free and gets created.
	store := map[string]*appsv1.ControllerRevision{
		"x-0": {ObjectMeta: metav1.ObjectMeta{Name: "x-0", Labels: map[string]string{"owner": "other"}}},
		"x-1": nil, // taken by an object the caller does not control
	}
	get := func(name string) (*appsv1.ControllerRevision, error) {
		if cr, ok := store[name]; ok {
			return cr, nil
		}
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"owner": "me"}}}
		store[name] = cr
		return cr, nil
	}
	holds := func(cr *appsv1.ControllerRevision) bool { return cr.Labels["owner"] == "me" }
	var collided []string
	cr, count, err := Resolve(nil, nameFor, get, holds, func(n string) { collided = append(collided, n) })
	if err != nil || cr.Name != "x-2" || count == nil || *count != 2 || fmt.Sprint(collided) != "[x-0 x-1]" {
		t.Fatalf("Resolve = %v, %v, %v (collisions %v); want x-2 at count 2 after x-0 and x-1", cr, count, err, collided)
	}
	// Resolved again from the persisted count: no collision.
	collided = nil
	cr, count, err = Resolve(count, nameFor, get, holds, func(n string) { collided = append(collided, n) })
	if err != nil || cr.Name != "x-2" || *count != 2 || collided != nil {
		t.Fatalf("second Resolve = %v, %v, %v (collisions %v)", cr, count, err, collided)
	}
	// Every name taken: an error, not a loop.
	_, _, err = Resolve(nil, nameFor, func(string) (*appsv1.ControllerRevision, error) { return nil, nil }, holds, func(string) {})
	if err == nil {
		t.Fatal("Resolve with every name taken returned no error")
	}
}

func TestCounter(t *testing.T) {
	var c Counter
	if got := c.Max("a", "u1", "a-1", 3); got != 3 {
		t.Fatalf("Max with nothing recorded = %d", got)
	}
	c.Record("a", "u1", "a-1", 5)
	if got := c.Max("a", "u1", "a-2", 3); got != 5 {
		t.Fatalf("Max for another revision = %d, want the recorded 5", got)
	}
	if got := c.Max("a", "u1", "a-1", 3); got != 3 {
		t.Fatalf("Max for the recorded revision itself = %d, want 3", got)
	}
	if got := c.Max("a", "u2", "a-2", 3); got != 3 {
		t.Fatalf("Max for a new owner of the same name = %d, want 3", got)
	}
	c.Forget("a")
	if got := c.Max("a", "u1", "a-2", 3); got != 3 {
		t.Fatalf("Max after Forget = %d, want 3", got)
	}
}

func TestFind(t *testing.T) {
	revs := []*appsv1.ControllerRevision{{ObjectMeta: metav1.ObjectMeta{Name: "web-a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "web-b"}}}
	if got := Find(revs, "web-b"); got != revs[1] {
		t.Errorf("Find(web-b) = %v, want the second revision", got)
	}
	if got := Find(revs, "web-c"); got != nil {
		t.Errorf("Find(web-c) = %v, want none", got)
	}
	if got := Find(nil, "web-a"); got != nil {
		t.Errorf("Find in no revisions = %v, want none", got)
	}
}
