package podset

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// resolveRollback finds the revision a rollback-to value names: a number
// (the ControllerRevision's revision), a ControllerRevision name, a
// revision hash, or "previous": the newest revision whose template differs
// from the current one. It returns nil if none matches.
func resolveRollback(value string, revs []revisionInfo, current *corev1.PodTemplateSpec) *revisionInfo {
	var found *revisionInfo
	n, numErr := strconv.ParseInt(value, 10, 64)
	for i := range revs {
		r := &revs[i]
		if r.template == nil {
			continue
		}
		switch {
		case value == rollbackPrevious:
			if !apiequality.Semantic.DeepEqual(*r.template, *current) && (found == nil || r.number > found.number) {
				found = r
			}
		case numErr == nil:
			if r.number == n {
				return r
			}
		case r.name == value || r.hash == value:
			return r
		}
	}
	return found
}

// rollbackPatch is the JSON patch that consumes the rollback-to
// annotation: it applies only if the annotation still has the value the
// controller resolved ("test"), and sets the template (when template is
// not nil) and removes the annotation in the same write, so a crash
// leaves either both done or neither.
func rollbackPatch(value string, template *corev1.PodTemplateSpec) ([]byte, error) {
	const path = "/metadata/annotations/apps.deckhand.dev~1rollback-to"
	ops := []map[string]any{
		{"op": "test", "path": path, "value": value},
		{"op": "remove", "path": path},
	}
	if template != nil {
		ops = append(ops, map[string]any{"op": "replace", "path": "/spec/template", "value": template})
	}
	return json.Marshal(ops)
}

// rollback consumes the rollback-to annotation, if set. It reports whether
// it wrote the PodSet (or found it gone); the sync then ends, and the
// write's own event starts the next one. When it could not write, the sync
// goes on with the current template: a rollback that keeps failing must
// not stop the PodSet from keeping its pods.
func (r *Reconciler) rollback(ctx context.Context, ps *deckhandv1alpha1.PodSet) (bool, error) {
	value, ok := ps.Annotations[deckhandv1alpha1.PodSetRollbackToAnnotation]
	if !ok || ps.DeletionTimestamp != nil {
		return false, nil
	}
	revs, err := r.listRevisions(ctx, ps)
	if err != nil {
		return false, err
	}
	infos := make([]revisionInfo, len(revs))
	for i, cr := range revs {
		infos[i] = infoOf(cr)
	}
	target := resolveRollback(value, infos, &ps.Spec.Template)
	var tmpl *corev1.PodTemplateSpec
	unchanged := target != nil && apiequality.Semantic.DeepEqual(*target.template, ps.Spec.Template)
	if target != nil && !unchanged {
		tmpl = target.template
	}
	patch, err := rollbackPatch(value, tmpl)
	if err != nil {
		return false, err
	}
	if err := r.Client.Patch(ctx, ps, client.RawPatch(types.JSONPatchType, patch), client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		// A failed "test" (the annotation changed or went since the cache
		// showed it) lands here too, as does a refusal of the webhook: the
		// sync goes on with the current template and the next one tries
		// again.
		return false, fmt.Errorf("consuming %s=%s: %w", deckhandv1alpha1.PodSetRollbackToAnnotation, value, err)
	}
	switch {
	case target == nil:
		r.Recorder.Eventf(ps, nil, corev1.EventTypeWarning, ReasonRollbackRevisionNotFound, "Rollback",
			"Unable to find revision %q to roll back to; annotation %s removed", value, deckhandv1alpha1.PodSetRollbackToAnnotation)
	case unchanged:
		r.Recorder.Eventf(ps, nil, corev1.EventTypeNormal, ReasonRollbackTemplateUnchanged, "Rollback",
			"The template of revision %d (%s) is the current one; nothing to roll back", target.number, target.name)
	default:
		r.Recorder.Eventf(ps, nil, corev1.EventTypeNormal, ReasonRolledBack, "Rollback",
			"Rolled back to revision %d (%s)", target.number, target.name)
	}
	return true, nil
}

// renumber gives the current template's ControllerRevision the highest
// number when the template came back to an earlier revision (a rollback
// or a revert), as a Deployment's rollback makes the old ReplicaSet's
// revision the newest.
func (r *Reconciler) renumber(ctx context.Context, s *scope, cur *appsv1.ControllerRevision, revs []*appsv1.ControllerRevision) error {
	number, renumber := r.revisionNumbers.Newest(s.key, s.ps.UID, cur, revs)
	if !renumber {
		return nil
	}
	patch := fmt.Appendf(nil, `{"revision":%d}`, number)
	if err := r.Client.Patch(ctx, cur, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
		return fmt.Errorf("renumbering ControllerRevision %s: %w", cur.Name, err)
	}
	r.revisionNumbers.Record(s.key, s.ps.UID, cur.Name, number)
	return nil
}
