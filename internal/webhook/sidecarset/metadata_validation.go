package sidecarset

import (
	"fmt"
	"maps"
	"slices"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// validatePatchPodMetadata checks spec.patchPodMetadata: well-formed
// annotation keys, known policies, JSON objects for MergePatchJson, and
// every key allowed by the manager's allowlist. A key the old object
// already set is not checked against the allowlist again, so that
// narrowing the allowlist does not lock existing SidecarSets against every
// other change (injection drops the keys the allowlist no longer allows).
func validatePatchPodMetadata(old, s *deckhandv1alpha1.SidecarSet, allow sidecarcontrol.MetadataAllowlist) field.ErrorList {
	var errs field.ErrorList
	had := keysSetBy(old, func(e deckhandv1alpha1.SidecarSetPatchPodMetadata) map[string]string { return e.Annotations })
	base := field.NewPath("spec", "patchPodMetadata")
	for i, e := range s.Spec.PatchPodMetadata {
		p := base.Index(i)
		switch e.PatchPolicy {
		case "", deckhandv1alpha1.SidecarSetRetainPatchPolicy, deckhandv1alpha1.SidecarSetOverwritePatchPolicy, deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy:
		default:
			errs = append(errs, field.NotSupported(p.Child("patchPolicy"), e.PatchPolicy, []string{
				string(deckhandv1alpha1.SidecarSetRetainPatchPolicy), string(deckhandv1alpha1.SidecarSetOverwritePatchPolicy), string(deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy)}))
		}
		if len(e.Annotations) == 0 {
			if len(e.Labels) == 0 {
				errs = append(errs, field.Required(p.Child("annotations"), "name at least one annotation or label"))
			}
			continue
		}
		errs = append(errs, apivalidation.ValidateAnnotations(e.Annotations, p.Child("annotations"))...)
		for _, k := range slices.Sorted(maps.Keys(e.Annotations)) {
			kp := p.Child("annotations").Key(k)
			switch {
			case sidecarcontrol.IsReservedAnnotation(k):
				errs = append(errs, field.Forbidden(kp, fmt.Sprintf("annotation keys under %[1]s/ and *.%[1]s/ are Deckhand's own and cannot be patched", sidecarcontrol.ReservedAnnotationDomain)))
			case !allow.Allows(k) && !had[k]:
				errs = append(errs, field.Forbidden(kp, fmt.Sprintf("annotation key %q is not allowed by the manager's --sidecarset-pod-metadata-allowlist (%s): a platform administrator decides which pod annotations SidecarSets may set", k, allowlistText(allow))))
			}
			if e.PatchPolicy == deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy {
				if _, ok := sidecarcontrol.MergeJSONObject("{}", e.Annotations[k]); !ok {
					errs = append(errs, field.Invalid(kp, e.Annotations[k], "patchPolicy MergePatchJson needs a JSON object value"))
				}
			}
		}
	}
	return errs
}

// validatePatchPodLabels checks the labels of spec.patchPodMetadata:
// well-formed label keys and values, no MergePatchJson (a label value
// cannot hold a JSON object), no key of the SidecarSet's own selector, and
// every key allowed by the manager's --sidecarset-pod-label-allowlist (a
// key the old object already set is not checked against it again, as for
// annotations).
func validatePatchPodLabels(old, s *deckhandv1alpha1.SidecarSet, allow sidecarcontrol.MetadataAllowlist) field.ErrorList {
	var errs field.ErrorList
	had := keysSetBy(old, func(e deckhandv1alpha1.SidecarSetPatchPodMetadata) map[string]string { return e.Labels })
	selectorKeys := map[string]bool{}
	if sel := s.Spec.Selector; sel != nil {
		for k := range sel.MatchLabels {
			selectorKeys[k] = true
		}
		for _, r := range sel.MatchExpressions {
			selectorKeys[r.Key] = true
		}
	}
	base := field.NewPath("spec", "patchPodMetadata")
	for i, e := range s.Spec.PatchPodMetadata {
		if len(e.Labels) == 0 {
			continue
		}
		p := base.Index(i).Child("labels")
		if e.PatchPolicy == deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy {
			errs = append(errs, field.Forbidden(p, "patchPolicy MergePatchJson applies to annotations only: a label value cannot hold a JSON object"))
			continue
		}
		errs = append(errs, metav1validation.ValidateLabels(e.Labels, p)...)
		for _, k := range slices.Sorted(maps.Keys(e.Labels)) {
			kp := p.Key(k)
			switch {
			case sidecarcontrol.IsReservedAnnotation(k):
				errs = append(errs, field.Forbidden(kp, fmt.Sprintf("label keys under %[1]s/ and *.%[1]s/ are Deckhand's own and cannot be patched", sidecarcontrol.ReservedAnnotationDomain)))
			case selectorKeys[k]:
				errs = append(errs, field.Forbidden(kp, fmt.Sprintf("label key %q is in spec.selector: setting it would change which pods the SidecarSet itself selects", k)))
			case !allow.Allows(k) && !had[k]:
				errs = append(errs, field.Forbidden(kp, fmt.Sprintf("label key %q is not allowed by the manager's --sidecarset-pod-label-allowlist (%s): a platform administrator decides which pod labels SidecarSets may set", k, allowlistText(allow))))
			}
		}
	}
	return errs
}

// keysSetBy returns the keys that old (nil on create) sets through
// spec.patchPodMetadata in the map of each entry that pick returns.
func keysSetBy(old *deckhandv1alpha1.SidecarSet, pick func(deckhandv1alpha1.SidecarSetPatchPodMetadata) map[string]string) map[string]bool {
	had := map[string]bool{}
	if old == nil {
		return had
	}
	for _, e := range old.Spec.PatchPodMetadata {
		for k := range pick(e) {
			had[k] = true
		}
	}
	return had
}

func allowlistText(a sidecarcontrol.MetadataAllowlist) string {
	if s := a.String(); s != "" {
		return "allowed: " + s
	}
	return "empty: no key is allowed"
}

// policyModeUnsupported lists the fields that spec.injectionMode Policy
// cannot inject: the MutatingAdmissionPolicy applies the policies of
// several SidecarSets in no set order, and the fields below depend on what
// the others did before (patchPodMetadata's Retain, Overwrite and merge
// over one annotation) or need more than CEL does comfortably (a JSON
// merge patch of an annotation's value).
func policyModeUnsupported(s *deckhandv1alpha1.SidecarSet) field.ErrorList {
	var errs field.ErrorList
	if len(s.Spec.PatchPodMetadata) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "patchPodMetadata"),
			"spec.injectionMode: Policy does not support spec.patchPodMetadata (use injectionMode Webhook)"))
	}
	return errs
}

// validateInjectionExtras checks the injection-time fields that depend on
// the manager's settings: the metadata allowlist, and the fields Policy
// mode (spec.injectionMode, or the manager's default) cannot inject.
func (v *Validator) validateInjectionExtras(old, s *deckhandv1alpha1.SidecarSet) field.ErrorList {
	errs := validatePatchPodMetadata(old, s, v.MetadataAllowlist)
	errs = append(errs, validatePatchPodLabels(old, s, v.LabelAllowlist)...)
	errs = append(errs, validateResourcesPolicies(s)...)
	mode := s.Spec.InjectionMode
	if v.Lister != nil {
		mode = v.Lister.Modes().Effective(s)
	}
	if mode == deckhandv1alpha1.PolicyInjection {
		errs = append(errs, policyModeUnsupported(s)...)
		errs = append(errs, transferPolicyUnsupported(s)...)
		errs = append(errs, resourcesPolicyUnsupported(s)...)
	}
	return errs
}
