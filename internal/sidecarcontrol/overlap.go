package sidecarcontrol

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// The overlap rule. Two SidecarSets can inject into the same pod unless
// Deckhand can prove they cannot: it is conservative and treats them as
// overlapping whenever some pod in some namespace could satisfy both.
//
//   - Namespaces: spec.namespace N is read as the namespace label
//     kubernetes.io/metadata.name=N (which the API server sets on every
//     namespace), combined with spec.namespaceSelector. The two SidecarSets'
//     namespace constraints overlap unless some label key has requirements
//     no single value (or absence) satisfies: different namespaces, In sets
//     with no common value, Exists against DoesNotExist, and so on. Today's
//     namespace labels are not consulted: they can change.
//   - Pods: the two pod selectors are checked the same way.
//
// Label selectors are conjunctions of per-key requirements, so the check is
// exact for selectors: it reports an overlap only if a label set matching
// both exists.

// CanOverlap reports whether a and b can select the same pod.
func CanOverlap(a, b *deckhandv1alpha1.SidecarSet) bool {
	return selectorsCanOverlap(namespaceRequirements(a), namespaceRequirements(b)) &&
		selectorsCanOverlap(a.Spec.Selector, b.Spec.Selector)
}

func namespaceRequirements(s *deckhandv1alpha1.SidecarSet) *metav1.LabelSelector {
	if s.Spec.Namespace == "" {
		return s.Spec.NamespaceSelector
	}
	sel := &metav1.LabelSelector{}
	if s.Spec.NamespaceSelector != nil {
		sel = s.Spec.NamespaceSelector.DeepCopy()
	}
	sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{s.Spec.Namespace},
	})
	return sel
}

// keyConstraint gathers every requirement two selectors put on one key.
type keyConstraint struct {
	in           []sets.Set[string] // each set must contain the value
	notIn        sets.Set[string]
	exists       bool
	doesNotExist bool
}

// selectorsCanOverlap reports whether some label set matches both a and b
// (nil matches everything).
func selectorsCanOverlap(a, b *metav1.LabelSelector) bool {
	keys := map[string]*keyConstraint{}
	get := func(k string) *keyConstraint {
		c := keys[k]
		if c == nil {
			c = &keyConstraint{notIn: sets.New[string]()}
			keys[k] = c
		}
		return c
	}
	for _, sel := range []*metav1.LabelSelector{a, b} {
		if sel == nil {
			continue
		}
		for k, v := range sel.MatchLabels {
			get(k).in = append(get(k).in, sets.New(v))
		}
		for _, r := range sel.MatchExpressions {
			c := get(r.Key)
			switch r.Operator {
			case metav1.LabelSelectorOpIn:
				c.in = append(c.in, sets.New(r.Values...))
			case metav1.LabelSelectorOpNotIn:
				c.notIn.Insert(r.Values...)
			case metav1.LabelSelectorOpExists:
				c.exists = true
			case metav1.LabelSelectorOpDoesNotExist:
				c.doesNotExist = true
			}
		}
	}
	for _, c := range keys {
		if !c.satisfiable() {
			return false
		}
	}
	return true
}

func (c *keyConstraint) satisfiable() bool {
	if c.doesNotExist {
		// NotIn is satisfied by an absent key; In and Exists are not.
		return len(c.in) == 0 && !c.exists
	}
	if len(c.in) == 0 {
		return true // Exists and NotIn: some value outside notIn exists
	}
	common := c.in[0].Clone()
	for _, s := range c.in[1:] {
		common = common.Intersection(s)
	}
	return common.Difference(c.notIn).Len() > 0
}
