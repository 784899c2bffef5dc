package sidecarcontrol

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// PinnedRevision returns the ControllerRevision that
// spec.injectionStrategy.revision of s pins (shared with the cache), nil if
// it pins none or the pinned one does not exist.
func (l *Lister) PinnedRevision(s *deckhandv1alpha1.SidecarSet) *appsv1.ControllerRevision {
	if l.revisions == nil {
		return nil
	}
	if r := l.revisions.pinned(s); r != nil {
		return r.cr
	}
	return nil
}

// Injection returns what the pod webhook injects for s (compiled as c)
// into a new pod with podLabels: s itself, or, when
// spec.injectionStrategy.revision pins an existing revision and the pin's
// policy applies to the pod (UsePinned), s with that revision's injected
// parts. A SidecarSet that pins nothing costs one nil check.
func (l *Lister) Injection(s *deckhandv1alpha1.SidecarSet, c *Compiled, podLabels map[string]string) (*deckhandv1alpha1.SidecarSet, *Compiled) {
	if s.Spec.InjectionStrategy.Revision == nil || l.revisions == nil {
		return s, c
	}
	r := l.revisions.pinned(s)
	if r == nil || r.hash == c.Hash || !UsePinned(s, c, podLabels) {
		return s, c
	}
	ps, pc, err := r.form(s, l.podMetadataAllowlists())
	if err != nil {
		return s, c
	}
	return ps, pc
}

// PolicyInjection returns what the MutatingAdmissionPolicy of s injects:
// s with the pinned revision's injected parts under policy Always (Partial
// is refused for Policy mode at validation: which pods get the pinned
// revision depends on the rollout's state), else s. found is false when a
// pin of policy Always names no existing revision.
func (l *Lister) PolicyInjection(s *deckhandv1alpha1.SidecarSet) (set *deckhandv1alpha1.SidecarSet, found bool) {
	pin := s.Spec.InjectionStrategy.Revision
	if pin == nil || pin.Policy == deckhandv1alpha1.PartialInjectRevision || l.revisions == nil {
		return s, pin == nil || pin.Policy == deckhandv1alpha1.PartialInjectRevision
	}
	r := l.revisions.pinned(s)
	if r == nil {
		return s, false
	}
	ps, _, err := r.form(s, l.podMetadataAllowlists())
	if err != nil {
		return s, false
	}
	return ps, true
}

// UsePinned reports whether a new pod with podLabels gets the revision
// spec.injectionStrategy.revision of s (compiled as c) pins rather than the
// latest. Policy Always, or a paused rollout: always. Policy Partial: the
// pods updateStrategy keeps back: those updateStrategy.selector does not
// select; with a partition, a pod while fewer than partition pods carry
// another revision than the latest (status.matchedPods -
// status.updatedPods, counts that lag a burst of new pods; the rollout
// moves any surplus); with neither, none.
func UsePinned(s *deckhandv1alpha1.SidecarSet, c *Compiled, podLabels map[string]string) bool {
	pin := s.Spec.InjectionStrategy.Revision
	us := &s.Spec.UpdateStrategy
	if pin.Policy != deckhandv1alpha1.PartialInjectRevision || us.Paused {
		return true
	}
	if c.UpdateSelector != nil {
		return !c.UpdateSelector.Matches(labels.Set(podLabels))
	}
	if us.Partition != nil {
		matched := int(s.Status.MatchedPods)
		keep, err := intstr.GetScaledValueFromIntOrPercent(us.Partition, matched, true)
		if err != nil {
			return false
		}
		return matched-int(s.Status.UpdatedPods) < keep
	}
	return false
}
