package updateorder

import (
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// Validate returns what is wrong with a priority strategy at priPath and a
// scatter strategy at scatterPath: exactly one of weightPriority and
// orderPriority, weights between 0 and 100, selectors that parse, label
// keys and values a pod could carry, no term twice.
func Validate(pri *deckhandv1alpha1.UpdatePriorityStrategy, priPath *field.Path, scatter []deckhandv1alpha1.UpdateScatterTerm, scatterPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pri != nil {
		switch {
		case len(pri.WeightPriority) > 0 && len(pri.OrderPriority) > 0:
			errs = append(errs, field.Forbidden(priPath.Child("orderPriority"), "may not be set together with weightPriority: set exactly one of them"))
		case len(pri.WeightPriority) == 0 && len(pri.OrderPriority) == 0:
			errs = append(errs, field.Required(priPath, "exactly one of weightPriority and orderPriority must be set"))
		}
		for i := range pri.WeightPriority {
			t := &pri.WeightPriority[i]
			p := priPath.Child("weightPriority").Index(i)
			if t.Weight < 0 || t.Weight > 100 {
				errs = append(errs, field.Invalid(p.Child("weight"), t.Weight, "must be between 0 and 100"))
			}
			if len(t.MatchSelector.MatchLabels)+len(t.MatchSelector.MatchExpressions) == 0 {
				errs = append(errs, field.Required(p.Child("matchSelector"), "an empty selector would weigh every pod alike"))
			}
			errs = append(errs, metav1validation.ValidateLabelSelector(&t.MatchSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("matchSelector"))...)
		}
		keys := map[string]bool{}
		for i, t := range pri.OrderPriority {
			p := priPath.Child("orderPriority").Index(i).Child("orderedKey")
			errs = append(errs, labelKey(t.OrderedKey, p)...)
			if keys[t.OrderedKey] {
				errs = append(errs, field.Duplicate(p, t.OrderedKey))
			}
			keys[t.OrderedKey] = true
		}
	}
	seen := map[deckhandv1alpha1.UpdateScatterTerm]bool{}
	for i, t := range scatter {
		p := scatterPath.Index(i)
		errs = append(errs, labelKey(t.Key, p.Child("key"))...)
		switch {
		case t.Value == "":
			errs = append(errs, field.Required(p.Child("value"), `a label value, or "*" for each value`))
		case t.Value != "*":
			for _, msg := range validation.IsValidLabelValue(t.Value) {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
			}
		}
		if seen[t] {
			errs = append(errs, field.Duplicate(p, t.Key+"="+t.Value))
		}
		seen[t] = true
	}
	return errs
}

func labelKey(k string, p *field.Path) field.ErrorList {
	if k == "" {
		return field.ErrorList{field.Required(p, "a pod label key")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(k) {
		errs = append(errs, field.Invalid(p, k, msg))
	}
	return errs
}
