package sidecarcontrol

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSelectorsCanOverlap(t *testing.T) {
	ml := func(kv ...string) *metav1.LabelSelector {
		s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := 0; i < len(kv); i += 2 {
			s.MatchLabels[kv[i]] = kv[i+1]
		}
		return s
	}
	expr := func(key string, op metav1.LabelSelectorOperator, vals ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: op, Values: vals}}}
	}
	cases := map[string]struct {
		a, b *metav1.LabelSelector
		want bool
	}{
		"nil matches everything":      {nil, ml("app", "web"), true},
		"same labels":                 {ml("app", "web"), ml("app", "web"), true},
		"different keys":              {ml("app", "web"), ml("tier", "front"), true},
		"different values":            {ml("app", "web"), ml("app", "db"), false},
		"In sets intersect":           {expr("app", metav1.LabelSelectorOpIn, "a", "b"), expr("app", metav1.LabelSelectorOpIn, "b", "c"), true},
		"In sets disjoint":            {expr("app", metav1.LabelSelectorOpIn, "a"), expr("app", metav1.LabelSelectorOpIn, "c"), false},
		"NotIn excludes the value":    {ml("app", "web"), expr("app", metav1.LabelSelectorOpNotIn, "web"), false},
		"NotIn leaves other values":   {ml("app", "web"), expr("app", metav1.LabelSelectorOpNotIn, "db"), true},
		"Exists vs DoesNotExist":      {expr("x", metav1.LabelSelectorOpExists), expr("x", metav1.LabelSelectorOpDoesNotExist), false},
		"label vs DoesNotExist":       {ml("x", "1"), expr("x", metav1.LabelSelectorOpDoesNotExist), false},
		"NotIn and DoesNotExist":      {expr("x", metav1.LabelSelectorOpNotIn, "1"), expr("x", metav1.LabelSelectorOpDoesNotExist), true},
		"Exists and NotIn":            {expr("x", metav1.LabelSelectorOpExists), expr("x", metav1.LabelSelectorOpNotIn, "1"), true},
		"namespace names disagree":    {ml("kubernetes.io/metadata.name", "a"), ml("kubernetes.io/metadata.name", "b"), false},
		"In narrowed by NotIn to nil": {expr("x", metav1.LabelSelectorOpIn, "1", "2"), expr("x", metav1.LabelSelectorOpNotIn, "1", "2"), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := selectorsCanOverlap(tc.a, tc.b); got != tc.want {
				t.Errorf("selectorsCanOverlap = %v, want %v", got, tc.want)
			}
			if got := selectorsCanOverlap(tc.b, tc.a); got != tc.want {
				t.Errorf("not symmetric: %v", got)
			}
		})
	}
}
