package sidecarset

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/revisionhistory"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// Event and condition reasons of the revision history.
const (
	// ReasonRevisionCollision: a ControllerRevision of the latest revision's
	// name exists with other data or another owner; collisionCount goes up.
	ReasonRevisionCollision = "RevisionCollision"
	// ReasonRevisionFound: the revision spec.injectionStrategy.revision pins
	// exists; new pods get it as its policy says.
	ReasonRevisionFound = "RevisionFound"
	// ReasonRevisionNotFound: the pinned revision does not exist (any
	// more); new pods get the latest revision.
	ReasonRevisionNotFound = "RevisionNotFound"
)

// The revision history: one ControllerRevision per revision, in the
// manager's namespace, which the garbage collector deletes with the
// SidecarSet (a namespaced dependent may have a cluster-scoped owner).
// blockOwnerDeletion needs update on sidecarsets/finalizers where
// OwnerReferencesPermissionEnforcement is enabled.
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=list;watch;get;create;patch;delete,roleName=manager-sidecarset-role
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=sidecarsets/finalizers,verbs=update,roleName=manager-sidecarset-role

// syncRevisions makes sure the latest revision has a ControllerRevision
// (numbered after every other, carrying the SidecarSet's custom-version
// label), settles the collision count, prunes the history down to
// revisionHistoryLimit and reports the pinned revision. It runs after
// computeStatus, whose pod list tells which revisions pods carry, and
// writes its results into that status.
func (r *Reconciler) syncRevisions(ctx context.Context, sc *scope) (ctrl.Result, error) {
	if sc.status.LatestRevision == "" || !r.Lister.RevisionsWatched() {
		return ctrl.Result{}, nil // the pods are unknown: nothing can be pruned safely
	}
	s := sc.set
	revs := r.Lister.Revisions(s)
	hash := sc.compiled.Hash
	want, err := sidecarcontrol.EncodeRevision(&s.Spec)
	if err != nil {
		return ctrl.Result{}, err
	}
	wantSpec := sidecarcontrol.RevisionSpecOf(&s.Spec)
	nameFor := func(count *int32) string {
		return revisionhistory.Name(s.Name, sidecarcontrol.RevisionNameHash(hash, count))
	}
	get := func(name string) (*appsv1.ControllerRevision, error) {
		if cr := revisionhistory.Find(revs, name); cr != nil {
			return cr, nil
		}
		return r.createRevision(ctx, s, name, hash, want, revs)
	}
	holds := func(cr *appsv1.ControllerRevision) bool {
		ref := metav1.GetControllerOfNoCopy(cr)
		if ref == nil || ref.UID != s.UID || cr.Labels[deckhandv1alpha1.SidecarSetRevisionLabel] != hash {
			return false
		}
		got, err := sidecarcontrol.DecodeRevision(cr)
		return err == nil && apiequality.Semantic.DeepEqual(got, wantSpec)
	}
	collided := func(name string) {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonRevisionCollision, "SyncRevision",
			"ControllerRevision %s/%s exists with other data or another owner; collisionCount goes up", r.Lister.RevisionNamespace(), name)
	}
	latest, count, err := revisionhistory.Resolve(s.Status.CollisionCount, nameFor, get, holds, collided)
	if count != nil {
		sc.status.CollisionCount = count
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	sc.status.LatestRevisionName = latest.Name
	if err := r.touchLatest(ctx, s, latest, revs); err != nil {
		return ctrl.Result{}, err
	}
	r.reportPin(sc)
	return ctrl.Result{}, r.pruneRevisions(ctx, sc, latest, revs)
}

// createRevision creates the ControllerRevision of the latest revision
// (revisionhistory.Counter.Create): it returns the one of that name the
// SidecarSet controls when the cache had not shown it, and nil when the
// name is taken by one the SidecarSet does not control.
func (r *Reconciler) createRevision(ctx context.Context, s *deckhandv1alpha1.SidecarSet, name, hash string, data []byte, revs []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	lbls := map[string]string{
		deckhandv1alpha1.SidecarSetNameLabel:     sidecarcontrol.NameLabelValue(s.Name),
		deckhandv1alpha1.SidecarSetRevisionLabel: hash,
	}
	if v, ok := s.Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel]; ok {
		lbls[deckhandv1alpha1.SidecarSetCustomVersionLabel] = v
	}
	t := true
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: r.Lister.RevisionNamespace(),
			Labels:    lbls,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: deckhandv1alpha1.GroupVersion.String(), Kind: "SidecarSet", Name: s.Name, UID: s.UID,
				Controller: &t, BlockOwnerDeletion: &t,
			}},
		},
		Data: runtime.RawExtension{Raw: data},
	}
	return r.memory.revisionNumbers.Create(ctx, r.Client, r.APIReader, s.Name, s.UID, cr, revs, client.FieldOwner(deckhandv1alpha1.FieldManager))
}

// touchLatest gives the latest revision's ControllerRevision the highest
// number when the spec came back to an earlier revision (so that it is
// the newest of its custom version and the last to be pruned), and the
// SidecarSet's custom-version label when that changed.
func (r *Reconciler) touchLatest(ctx context.Context, s *deckhandv1alpha1.SidecarSet, cur *appsv1.ControllerRevision, revs []*appsv1.ControllerRevision) error {
	var parts []string
	number, renumber := r.memory.revisionNumbers.Newest(s.Name, s.UID, cur, revs)
	if renumber {
		parts = append(parts, fmt.Sprintf(`"revision":%d`, number))
	}
	if v, ok := s.Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel]; ok && cur.Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel] != v {
		parts = append(parts, fmt.Sprintf(`"metadata":{"labels":{%q:%q}}`, deckhandv1alpha1.SidecarSetCustomVersionLabel, v))
	}
	if len(parts) == 0 {
		return nil
	}
	patch := []byte("{" + strings.Join(parts, ",") + "}")
	if err := r.Client.Patch(ctx, cur.DeepCopy(), client.RawPatch(types.MergePatchType, patch), client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
		return fmt.Errorf("updating ControllerRevision %s: %w", cur.Name, err)
	}
	r.memory.revisionNumbers.Record(s.Name, s.UID, cur.Name, number)
	return nil
}

// revisionsToPrune picks the ControllerRevisions to delete so that at most
// limit remain (at least the latest): the oldest of those whose revision no
// pod carries and that are neither the latest nor pinned. In-use ones are
// never picked, so more than limit can remain. revs is oldest first.
func revisionsToPrune(revs []*appsv1.ControllerRevision, inUse map[string]bool, limit int) []*appsv1.ControllerRevision {
	hashOf := func(cr *appsv1.ControllerRevision) string {
		if inUse["name/"+cr.Name] {
			return "name/" + cr.Name
		}
		return cr.Labels[deckhandv1alpha1.SidecarSetRevisionLabel]
	}
	return revisionhistory.OldestIdle(revs, hashOf, inUse, len(revs)-max(limit, 1))
}

// pruneRevisions deletes the ControllerRevisions beyond
// revisionHistoryLimit that no pod uses.
func (r *Reconciler) pruneRevisions(ctx context.Context, sc *scope, latest *appsv1.ControllerRevision, revs []*appsv1.ControllerRevision) error {
	s := sc.set
	limit := deckhandv1alpha1.DefaultSidecarSetRevisionHistoryLimit
	if s.Spec.RevisionHistoryLimit != nil {
		limit = int(*s.Spec.RevisionHistoryLimit)
	}
	all := revs
	if revisionhistory.Find(revs, latest.Name) == nil {
		all = append(append([]*appsv1.ControllerRevision(nil), revs...), latest)
	}
	inUse := map[string]bool{sc.compiled.Hash: true, "name/" + latest.Name: true}
	for _, p := range sc.pods {
		if p.revision != "" {
			inUse[p.revision] = true
		}
	}
	if pinned := r.Lister.PinnedRevision(s); pinned != nil {
		inUse["name/"+pinned.Name] = true
	}
	return revisionhistory.Prune(ctx, r.Client, revisionsToPrune(all, inUse, limit))
}

// reportPin sets the InjectionRevisionFound condition while a revision is
// pinned (and removes it otherwise), with an Event when it turns False.
func (r *Reconciler) reportPin(sc *scope) {
	s, st := sc.set, &sc.status
	pin := s.Spec.InjectionStrategy.Revision
	if pin == nil {
		meta.RemoveStatusCondition(&st.Conditions, deckhandv1alpha1.SidecarSetInjectionRevisionFoundCondition)
		return
	}
	what := "revisionName " + deref(pin.RevisionName)
	if pin.RevisionName == nil {
		what = "customVersion " + deref(pin.CustomVersion)
	}
	c := metav1.Condition{Type: deckhandv1alpha1.SidecarSetInjectionRevisionFoundCondition, ObservedGeneration: s.Generation,
		LastTransitionTime: metav1.NewTime(sc.now)}
	if cr := r.Lister.PinnedRevision(s); cr != nil {
		c.Status, c.Reason = metav1.ConditionTrue, ReasonRevisionFound
		c.Message = fmt.Sprintf("injectionStrategy.revision (%s) pins ControllerRevision %s/%s (revision %s); policy %s", what, cr.Namespace, cr.Name,
			cr.Labels[deckhandv1alpha1.SidecarSetRevisionLabel], pinPolicy(pin))
	} else {
		c.Status, c.Reason = metav1.ConditionFalse, ReasonRevisionNotFound
		c.Message = fmt.Sprintf("injectionStrategy.revision (%s) names no ControllerRevision of this SidecarSet: new pods get the latest revision %s", what, sc.compiled.Hash)
	}
	before := meta.FindStatusCondition(s.Status.Conditions, c.Type)
	if c.Status == metav1.ConditionFalse && (before == nil || before.Status != c.Status) {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, c.Reason, "ResolveRevision", "%s", c.Message)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}

func pinPolicy(pin *deckhandv1alpha1.SidecarSetInjectRevision) deckhandv1alpha1.SidecarSetInjectRevisionPolicy {
	if pin.Policy == "" {
		return deckhandv1alpha1.AlwaysInjectRevision
	}
	return pin.Policy
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// revisionSource reconciles the SidecarSet that controls a ControllerRevision
// when the revision cache shows it change: a revision deleted by hand is
// created again, a pinned one that appears or disappears is reported.
func revisionSource(c cache.Cache) source.Source {
	return source.Kind(c, &appsv1.ControllerRevision{}, handler.TypedEnqueueRequestsFromMapFunc(
		func(_ context.Context, cr *appsv1.ControllerRevision) []reconcile.Request {
			ref := metav1.GetControllerOfNoCopy(cr)
			if ref == nil || ref.Kind != "SidecarSet" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: ref.Name}}}
		}))
}
