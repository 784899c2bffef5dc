package sidecarset

import (
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/revisionhistory"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// Pinned injection: the pod webhook injects what sidecarcontrol's
// Lister.Injection returns (the pinned revision's parts, decoded and
// compiled once per revision and SidecarSet generation), and records the
// pinned revision's hash on the pod, so that the controller sees the pod
// behind the latest revision and the rollout's selector and partition
// decide whether it moves.

// validatePin refuses a spec.injectionStrategy.revision that can be known
// not to resolve: one naming no ControllerRevision of the SidecarSet (a new
// SidecarSet has none yet), unless it names the revision the SidecarSet is
// about to get (its own custom version, or the name its spec's revision
// takes). A pin an update leaves as it was is not checked again: its
// revision may have gone since, which the controller reports, and refusing
// would block every other change (labels, finalizers) to the SidecarSet.
// It also refuses policy Partial in Policy injection mode.
func validatePin(old, s *deckhandv1alpha1.SidecarSet, l *sidecarcontrol.Lister) field.ErrorList {
	pin := s.Spec.InjectionStrategy.Revision
	if pin == nil {
		return nil
	}
	var errs field.ErrorList
	path := field.NewPath("spec", "injectionStrategy", "revision")
	if pin.Policy == deckhandv1alpha1.PartialInjectRevision && l.Modes().Effective(s) == deckhandv1alpha1.PolicyInjection {
		errs = append(errs, field.Invalid(path.Child("policy"), pin.Policy,
			"spec.injectionMode: Policy does not support spec.injectionStrategy.revision.policy: Partial (which pods get the pinned revision depends on the rollout's state, which a MutatingAdmissionPolicy cannot read); use Always, or injectionMode Webhook"))
	}
	if old != nil && apiequality.Semantic.DeepEqual(old.Spec.InjectionStrategy.Revision, pin) {
		return errs
	}
	if !l.RevisionsWatched() || !l.HasSynced() {
		return errs // cannot be known: the controller reports it (InjectionRevisionFound)
	}
	if l.PinnedRevision(s) != nil {
		return errs
	}
	switch {
	case pin.RevisionName != nil:
		hash, _ := sidecarcontrol.Hashes(&s.Spec)
		if *pin.RevisionName == revisionhistory.Name(s.Name, sidecarcontrol.RevisionNameHash(hash, s.Status.CollisionCount)) {
			return errs
		}
		errs = append(errs, field.NotFound(path.Child("revisionName"), *pin.RevisionName))
		errs[len(errs)-1].Detail = fmt.Sprintf("no ControllerRevision of this SidecarSet in namespace %s has this name (status.latestRevisionName names the latest)", l.RevisionNamespace())
	case pin.CustomVersion != nil:
		if s.Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel] == *pin.CustomVersion {
			return errs
		}
		errs = append(errs, field.NotFound(path.Child("customVersion"), *pin.CustomVersion))
		errs[len(errs)-1].Detail = fmt.Sprintf("no ControllerRevision of this SidecarSet carries the label %s with this value", deckhandv1alpha1.SidecarSetCustomVersionLabel)
	}
	return errs
}
