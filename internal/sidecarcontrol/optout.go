package sidecarcontrol

import (
	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// OptedOut reports whether a pod with these annotations is left out of s:
// it carries the skip-injection annotation and s allows opting out
// (spec.injectionStrategy.allowOptOut). Without allowOptOut a SidecarSet's
// sidecars are mandatory for the pods it selects.
func OptedOut(s *deckhandv1alpha1.SidecarSet, annotations map[string]string) bool {
	return s.Spec.InjectionStrategy.AllowOptOut && SkipRequested(annotations)
}

// SkipRequested reports whether the annotations ask for no injection.
func SkipRequested(annotations map[string]string) bool {
	return annotations[deckhandv1alpha1.SidecarSetSkipInjectionAnnotation] == "true"
}

// ManagerUser returns Options.ManagerUser ("" when unknown: then no
// request is trusted to skip a mandatory SidecarSet).
func (l *Lister) ManagerUser() string { return l.managerUser }

// SkipsAll reports whether a pod created by user (as a dry run or not) with
// these annotations is injected by no SidecarSet at all: Deckhand's own
// dry-run pods. Note: the manager creates real pods too (a PodSet's, from
// a tenant's template, annotations included), so its user alone is not
// enough: only its dry runs, which store nothing, are trusted.
func (l *Lister) SkipsAll(user string, dryRun bool, annotations map[string]string) bool {
	return dryRun && l.managerUser != "" && user == l.managerUser && SkipRequested(annotations)
}
