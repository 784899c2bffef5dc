package revisionhistory

import (
	"fmt"
	"slices"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

// maxNameLen is the longest valid object name.
const maxNameLen = 253

// Name is the name of the ControllerRevision that holds an owner's
// revision: <owner>-<hash>, as a StatefulSet names its own. The owner's
// name is shortened if needed to keep the name a valid object name.
func Name(owner, hash string) string {
	if len(owner)+1+len(hash) > maxNameLen {
		owner = owner[:maxNameLen-1-len(hash)]
	}
	return owner + "-" + hash
}

// maxCollisions bounds Resolve: past it something other than chance keeps
// taking the names, and the caller reports an error rather than loop.
const maxCollisions = 100

// Resolve finds the ControllerRevision that holds a revision, moving past
// name collisions the way a StatefulSet does. nameFor gives the
// ControllerRevision name for a collision count; get returns the
// ControllerRevision of that name, creating it when there is none (nil when
// the name is taken by one the caller does not control); holds reports
// whether a ControllerRevision holds the revision (its data, and an owner
// that is the caller's). Each name that is taken by something else is a
// collision: onCollision is told, the count goes up and the next name is
// tried. It returns the ControllerRevision and the collision count that
// names it (count itself when there was no collision).
//
// Note: the count is the caller's to persist (a status field). A crash
// before it is persisted meets the same collisions again and counts them
// again, which gives the same answer.
func Resolve(count *int32, nameFor func(count *int32) string,
	get func(name string) (*appsv1.ControllerRevision, error),
	holds func(*appsv1.ControllerRevision) bool,
	onCollision func(name string),
) (*appsv1.ControllerRevision, *int32, error) {
	for range maxCollisions {
		name := nameFor(count)
		cr, err := get(name)
		if err != nil {
			return nil, count, err
		}
		if cr != nil && holds(cr) {
			return cr, count, nil
		}
		onCollision(name)
		next := int32(1)
		if count != nil {
			next = *count + 1
		}
		count = &next
	}
	return nil, count, fmt.Errorf("no free ControllerRevision name after %d collisions", maxCollisions)
}

// Find returns the ControllerRevision of revs called name, nil when there is
// none.
func Find(revs []*appsv1.ControllerRevision, name string) *appsv1.ControllerRevision {
	if i := slices.IndexFunc(revs, func(cr *appsv1.ControllerRevision) bool { return cr.Name == name }); i >= 0 {
		return revs[i]
	}
	return nil
}

// OldestIdle returns up to n of revs (sorted oldest first) whose hash is
// not in inUse, oldest first: the revisions to prune when n are too many.
// Revisions in use are never returned, whatever n says.
func OldestIdle[T any](revs []T, hashOf func(T) string, inUse map[string]bool, n int) []T {
	var out []T
	for _, r := range revs {
		if len(out) >= n {
			break
		}
		if !inUse[hashOf(r)] {
			out = append(out, r)
		}
	}
	return out
}

// Counter remembers, per owner, the highest revision number this process
// gave a ControllerRevision and to which, so that a sync whose cache does
// not show the previous sync's write yet does not give the same number
// twice. After a restart the cache starts from a full list, which shows
// every earlier one. The zero Counter is ready to use.
type Counter struct {
	mu   sync.Mutex
	last map[string]givenNumber
}

// givenNumber is the last number given for one owner (key), to which
// ControllerRevision; uid tells an owner from an earlier one of the same
// name.
type givenNumber struct {
	uid    types.UID
	name   string
	number int64
}

// Max returns the higher of seen and the last number given to another
// ControllerRevision than name of the owner key with uid.
func (c *Counter) Max(key string, uid types.UID, name string, seen int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g, ok := c.last[key]; ok && g.uid == uid && g.name != name {
		return max(seen, g.number)
	}
	return seen
}

// Record remembers that number n was given to the ControllerRevision name
// of the owner key with uid.
func (c *Counter) Record(key string, uid types.UID, name string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last = map[string]givenNumber{}
	}
	if g := c.last[key]; g.uid != uid || n >= g.number {
		c.last[key] = givenNumber{uid: uid, name: name, number: n}
	}
}

// Forget drops what is known of an owner that is gone.
func (c *Counter) Forget(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, key)
}
