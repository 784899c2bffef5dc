package sidecarpolicy

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestProbeLabels: the dry-run pod's labels come from matchLabels, In and
// Exists; a selector they cannot satisfy yields none.
func TestProbeLabels(t *testing.T) {
	req := func(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
		return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	for name, tc := range map[string]struct {
		sel  *metav1.LabelSelector
		want map[string]string
		ok   bool
	}{
		"nil":            {sel: nil},
		"match labels":   {sel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, want: map[string]string{"app": "web"}, ok: true},
		"in and exists":  {sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("app", metav1.LabelSelectorOpIn, "a", "b"), req("tier", metav1.LabelSelectorOpExists)}}, want: map[string]string{"app": "a", "tier": "probe"}, ok: true},
		"only excludes":  {sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("app", metav1.LabelSelectorOpNotIn, "a"), req("x", metav1.LabelSelectorOpDoesNotExist)}}, want: map[string]string{}, ok: true},
		"contradiction":  {sel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}, MatchExpressions: []metav1.LabelSelectorRequirement{req("app", metav1.LabelSelectorOpNotIn, "a")}}},
		"exists and not": {sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req("x", metav1.LabelSelectorOpExists), req("x", metav1.LabelSelectorOpDoesNotExist)}}},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := probeLabels(tc.sel)
			if ok != tc.ok || !maps.Equal(got, tc.want) {
				t.Errorf("probeLabels = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
