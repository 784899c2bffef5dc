package sidecarset

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// validateResourcesPolicies compiles every sidecar's resourcesPolicy (its
// CEL expressions and name pattern), as injection will, and refuses one
// set together with fixed resources.
func validateResourcesPolicies(s *deckhandv1alpha1.SidecarSet) field.ErrorList {
	var errs field.ErrorList
	eachSidecar(s, func(c *deckhandv1alpha1.SidecarContainer, cp *field.Path) {
		if c.ResourcesPolicy == nil {
			return
		}
		if len(c.Resources.Requests)+len(c.Resources.Limits) > 0 {
			errs = append(errs, field.Forbidden(cp.Child("resources"), "may not be set together with resourcesPolicy, which computes them"))
		}
		_, cerrs := sidecarcontrol.CompileResourcesPolicy(c.ResourcesPolicy)
		for _, e := range cerrs {
			p := cp.Child("resourcesPolicy")
			for _, part := range strings.Split(e.Field, ".") {
				p = p.Child(part)
			}
			if e.Value == "" {
				errs = append(errs, field.Required(p, e.Message))
			} else {
				errs = append(errs, field.Invalid(p, e.Value, e.Message))
			}
		}
	})
	return errs
}

// resourcesPolicyUnsupported: the compiled MutatingAdmissionPolicy does
// not evaluate resourcesPolicy expressions.
func resourcesPolicyUnsupported(s *deckhandv1alpha1.SidecarSet) field.ErrorList {
	var errs field.ErrorList
	eachSidecar(s, func(c *deckhandv1alpha1.SidecarContainer, cp *field.Path) {
		if c.ResourcesPolicy != nil {
			p := cp.Child("resourcesPolicy")
			errs = append(errs, field.Forbidden(p, "spec.injectionMode: Policy does not support "+p.String()+" (set resources, or use injectionMode Webhook)"))
		}
	})
	return errs
}

// eachSidecar calls fn with every init container and container of s and its
// field path, init containers first.
func eachSidecar(s *deckhandv1alpha1.SidecarSet, fn func(c *deckhandv1alpha1.SidecarContainer, path *field.Path)) {
	for _, l := range []struct {
		name string
		list []deckhandv1alpha1.SidecarContainer
	}{{"initContainers", s.Spec.InitContainers}, {"containers", s.Spec.Containers}} {
		for i := range l.list {
			fn(&l.list[i], field.NewPath("spec", l.name).Index(i))
		}
	}
}
