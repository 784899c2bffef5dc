package podset

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/revisionhistory"
)

// Event reasons of the revision history.
const (
	// ReasonRolledBack: the rollback-to annotation was consumed and the
	// template of the named revision copied into spec.template.
	ReasonRolledBack = "RolledBack"
	// ReasonRollbackRevisionNotFound: the rollback-to annotation named no
	// revision the PodSet keeps; the annotation was removed.
	ReasonRollbackRevisionNotFound = "RollbackRevisionNotFound"
	// ReasonRollbackTemplateUnchanged: the named revision's template is the
	// current one; the annotation was removed.
	ReasonRollbackTemplateUnchanged = "RollbackTemplateUnchanged"
	// ReasonRevisionCollision: a ControllerRevision of the revision's name
	// exists with another template or another owner; collisionCount goes up.
	ReasonRevisionCollision = "RevisionCollision"
)

// rollbackPrevious is the rollback-to value that names the revision before
// the current template.
const rollbackPrevious = "previous"

// defaultRevisionHistoryLimit applies when spec.revisionHistoryLimit is
// unset (the CRD defaults it; objects stored before the field existed may
// lack it).
const defaultRevisionHistoryLimit = 10

// RevisionWithCollisions is Revision with the collision count folded in,
// as StatefulSet's controller.ComputeHash does. With no collision it is
// Revision itself, so the revisions (and pod labels) of PodSets that never
// met a collision do not change.
func RevisionWithCollisions(t *corev1.PodTemplateSpec, collisionCount *int32) string {
	if collisionCount == nil || *collisionCount == 0 {
		return Revision(t)
	}
	return hashJSON(struct {
		Template       *corev1.PodTemplateSpec `json:"template"`
		CollisionCount int32                   `json:"collisionCount"`
	}{t, *collisionCount})
}

// RevisionName is the name of the ControllerRevision that holds a PodSet's
// revision: <podset>-<revision>, as a StatefulSet names its own.
func RevisionName(podSet, revision string) string {
	return revisionhistory.Name(podSet, revision)
}

// revisionData is the content of a ControllerRevision: the template, in the
// shape of the PodSet (a patch of it), as StatefulSet stores its revisions.
type revisionData struct {
	Spec struct {
		Template corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

func encodeRevision(t *corev1.PodTemplateSpec) ([]byte, error) {
	var d revisionData
	d.Spec.Template = *t
	return json.Marshal(d)
}

// revisionTemplate decodes the template a ControllerRevision holds.
func revisionTemplate(cr *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var d revisionData
	if err := json.Unmarshal(cr.Data.Raw, &d); err != nil {
		return nil, fmt.Errorf("ControllerRevision %s: %w", cr.Name, err)
	}
	return &d.Spec.Template, nil
}

// revisionInfo is what the pure parts of the history need of a
// ControllerRevision.
type revisionInfo struct {
	name string
	// hash is the revision (the pod label value, collisions included).
	hash   string
	number int64
	// template is nil when the data could not be decoded.
	template *corev1.PodTemplateSpec
}

func infoOf(cr *appsv1.ControllerRevision) revisionInfo {
	t, _ := revisionTemplate(cr)
	return revisionInfo{name: cr.Name, hash: cr.Labels[deckhandv1alpha1.PodSetRevisionLabel], number: cr.Revision, template: t}
}

// listRevisions returns the ControllerRevisions the PodSet controls, from
// the cache, oldest revision first.
func (r *Reconciler) listRevisions(ctx context.Context, ps *deckhandv1alpha1.PodSet) ([]*appsv1.ControllerRevision, error) {
	var list appsv1.ControllerRevisionList
	if err := r.Client.List(ctx, &list, client.InNamespace(ps.Namespace),
		client.MatchingLabels{deckhandv1alpha1.PodSetNameLabel: ps.Name}); err != nil {
		return nil, fmt.Errorf("listing ControllerRevisions: %w", err)
	}
	var out []*appsv1.ControllerRevision
	for i := range list.Items {
		cr := &list.Items[i]
		if ref := metav1.GetControllerOfNoCopy(cr); ref != nil && ref.UID == ps.UID {
			out = append(out, cr)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out, nil
}

// syncRevisions makes sure the current template has a ControllerRevision,
// numbered after every other revision of the PodSet, and settles the
// revision hash (s.revision) and the collision count. A ControllerRevision
// of the hash's name that holds another template, or that the PodSet does
// not control, is a collision: the count goes up and the hash changes, as
// for a StatefulSet. The count is persisted with the status at the end of
// the sync; a crash before that meets the same collision again and counts
// it again, which gives the same answer.
func (r *Reconciler) syncRevisions(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.ps.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	revs, err := r.listRevisions(ctx, s.ps)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.revisions = revs
	tmpl := &s.ps.Spec.Template
	var hash string
	nameFor := func(count *int32) string {
		hash = RevisionWithCollisions(tmpl, count)
		return RevisionName(s.ps.Name, hash)
	}
	get := func(name string) (*appsv1.ControllerRevision, error) {
		if cr := revisionhistory.Find(revs, name); cr != nil {
			return cr, nil
		}
		return r.createRevision(ctx, s, name, hash, revs)
	}
	holds := func(cr *appsv1.ControllerRevision) bool {
		t, err := revisionTemplate(cr)
		return err == nil && apiequality.Semantic.DeepEqual(*t, *tmpl)
	}
	collided := func(name string) {
		r.Recorder.Eventf(s.ps, nil, corev1.EventTypeWarning, ReasonRevisionCollision, "SyncRevision",
			"ControllerRevision %s exists with another template or owner; collisionCount goes up", name)
	}
	existing, count, err := revisionhistory.Resolve(s.collisionCount, nameFor, get, holds, collided)
	if err != nil {
		return ctrl.Result{}, err
	}
	s.revision = hash
	s.collisionCount = count
	return ctrl.Result{}, r.renumber(ctx, s, existing, revs)
}

// createRevision creates the ControllerRevision of the current template
// (revisionhistory.Counter.Create): it returns the one of that name the
// PodSet controls when the cache had not shown it, and nil when the name is
// taken by one the PodSet does not control.
func (r *Reconciler) createRevision(ctx context.Context, s *scope, name, hash string, revs []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	data, err := encodeRevision(&s.ps.Spec.Template)
	if err != nil {
		return nil, err
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: s.ps.Namespace,
			Labels: map[string]string{
				deckhandv1alpha1.PodSetNameLabel:     s.ps.Name,
				deckhandv1alpha1.PodSetRevisionLabel: hash,
			},
			OwnerReferences: []metav1.OwnerReference{controllerRef(s.ps)},
		},
		Data: runtime.RawExtension{Raw: data},
	}
	return r.revisionNumbers.Create(ctx, r.Client, r.APIReader, s.key, s.ps.UID, cr, revs, client.FieldOwner(deckhandv1alpha1.FieldManager))
}

// revisionsToPrune picks the ControllerRevisions to delete: of those no pod
// runs and that are neither the update nor the current revision, all but
// the limit newest. revs is sorted oldest first.
func revisionsToPrune(revs []revisionInfo, inUse map[string]bool, limit int) []revisionInfo {
	idle := 0
	for _, r := range revs {
		if !inUse[r.hash] {
			idle++
		}
	}
	return revisionhistory.OldestIdle(revs, func(r revisionInfo) string { return r.hash }, inUse, idle-limit)
}

// truncateHistory deletes the ControllerRevisions beyond
// revisionHistoryLimit that no pod uses. It runs after the pods are
// claimed, so that it knows every revision a pod still runs.
func (r *Reconciler) truncateHistory(ctx context.Context, s *scope) (ctrl.Result, error) {
	if s.ps.DeletionTimestamp != nil || s.revisions == nil {
		return ctrl.Result{}, nil
	}
	limit := defaultRevisionHistoryLimit
	if l := s.ps.Spec.RevisionHistoryLimit; l != nil {
		limit = int(*l)
	}
	// The stable revision is kept for onFailure Rollback.
	inUse := map[string]bool{s.revision: true, s.ps.Status.CurrentRevision: true, s.ps.Status.StableRevision: true}
	for _, p := range append(append([]*corev1.Pod(nil), s.pods...), s.terminating...) {
		inUse[p.Labels[deckhandv1alpha1.PodSetRevisionLabel]] = true
	}
	infos := make([]revisionInfo, len(s.revisions))
	byName := map[string]*appsv1.ControllerRevision{}
	for i, cr := range s.revisions {
		infos[i] = infoOf(cr)
		byName[cr.Name] = cr
	}
	victims := revisionsToPrune(infos, inUse, limit)
	crs := make([]*appsv1.ControllerRevision, len(victims))
	for i, v := range victims {
		crs[i] = byName[v.name]
	}
	return ctrl.Result{}, revisionhistory.Prune(ctx, r.Client, crs)
}
