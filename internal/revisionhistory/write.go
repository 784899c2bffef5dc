package revisionhistory

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Create creates cr as the newest ControllerRevision of the owner (key,
// uid): numbered after every one of revs (the owner's, as the cache shows
// them) and every number c gave another of its revisions. When the name is
// taken it reads the ControllerRevision past the cache through reader and
// returns it if the owner controls it (an earlier sync created it and the
// cache has not shown it yet), or nil if it does not: a collision, for
// Resolve's get.
func (c *Counter) Create(ctx context.Context, cl client.Client, reader client.Reader, key string, uid types.UID,
	cr *appsv1.ControllerRevision, revs []*appsv1.ControllerRevision, opts ...client.CreateOption) (*appsv1.ControllerRevision, error) {
	var highest int64
	for _, r := range revs {
		highest = max(highest, r.Revision)
	}
	cr.Revision = c.Max(key, uid, cr.Name, highest) + 1
	err := cl.Create(ctx, cr, opts...)
	if err == nil {
		c.Record(key, uid, cr.Name, cr.Revision)
		return cr, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating ControllerRevision %s: %w", cr.Name, err)
	}
	got := &appsv1.ControllerRevision{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: cr.Namespace, Name: cr.Name}, got); err != nil {
		return nil, fmt.Errorf("reading ControllerRevision %s: %w", cr.Name, err)
	}
	if ref := metav1.GetControllerOfNoCopy(got); ref == nil || ref.UID != uid {
		return nil, nil
	}
	c.Record(key, uid, got.Name, got.Revision)
	return got, nil
}

// Newest returns the number cur must carry to be the newest ControllerRevision
// of the owner (key, uid), and whether that is not its number yet: when the
// owner came back to an earlier revision (a rollback, a revert), its
// ControllerRevision becomes the newest again, as a Deployment's rollback
// makes the old ReplicaSet's revision the newest. The caller writes the
// number and then Records it.
func (c *Counter) Newest(key string, uid types.UID, cur *appsv1.ControllerRevision, revs []*appsv1.ControllerRevision) (int64, bool) {
	var others int64
	for _, r := range revs {
		if r.Name != cur.Name {
			others = max(others, r.Revision)
		}
	}
	others = c.Max(key, uid, cur.Name, others)
	if cur.Revision > others {
		return cur.Revision, false
	}
	return others + 1, true
}

// Prune deletes the ControllerRevisions revs (the ones OldestIdle picked),
// each only while it is the object that was read (its UID): one deleted and
// created again under the same name since is left alone, and one already
// gone is no error. revs may be shared with a cache: they are not modified.
func Prune(ctx context.Context, cl client.Client, revs []*appsv1.ControllerRevision) error {
	for _, cr := range revs {
		uid := cr.UID
		if err := cl.Delete(ctx, cr.DeepCopy(), client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting ControllerRevision %s: %w", cr.Name, err)
		}
	}
	return nil
}
