package updateorder

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestValidate(t *testing.T) {
	sel := metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}}
	cases := map[string]struct {
		pri     *deckhandv1alpha1.UpdatePriorityStrategy
		scatter []deckhandv1alpha1.UpdateScatterTerm
		want    string // the field of the first error, "" for none
	}{
		"nothing":        {},
		"weights":        {pri: &deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{{Weight: 100, MatchSelector: sel}}}},
		"order":          {pri: &deckhandv1alpha1.UpdatePriorityStrategy{OrderPriority: []deckhandv1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "example.com/wave"}}}},
		"scatter":        {scatter: []deckhandv1alpha1.UpdateScatterTerm{{Key: "zone", Value: "*"}, {Key: "rack", Value: "r1"}}},
		"neither":        {pri: &deckhandv1alpha1.UpdatePriorityStrategy{}, want: "u.priorityStrategy"},
		"both":           {pri: &deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{{Weight: 1, MatchSelector: sel}}, OrderPriority: []deckhandv1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "wave"}}}, want: "u.priorityStrategy.orderPriority"},
		"weight above":   {pri: &deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{{Weight: 101, MatchSelector: sel}}}, want: "u.priorityStrategy.weightPriority[0].weight"},
		"weight below":   {pri: &deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{{Weight: -1, MatchSelector: sel}}}, want: "u.priorityStrategy.weightPriority[0].weight"},
		"empty selector": {pri: &deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{{Weight: 1}}}, want: "u.priorityStrategy.weightPriority[0].matchSelector"},
		"bad operator": {pri: &deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{{Weight: 1, MatchSelector: metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}}}}}, want: "u.priorityStrategy.weightPriority[0].matchSelector.matchExpressions[0].operator"},
		"bad ordered key":   {pri: &deckhandv1alpha1.UpdatePriorityStrategy{OrderPriority: []deckhandv1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "a b"}}}, want: "u.priorityStrategy.orderPriority[0].orderedKey"},
		"twice the key":     {pri: &deckhandv1alpha1.UpdatePriorityStrategy{OrderPriority: []deckhandv1alpha1.UpdatePriorityOrderTerm{{OrderedKey: "w"}, {OrderedKey: "w"}}}, want: "u.priorityStrategy.orderPriority[1].orderedKey"},
		"scatter no key":    {scatter: []deckhandv1alpha1.UpdateScatterTerm{{Value: "a"}}, want: "u.scatterStrategy[0].key"},
		"scatter no value":  {scatter: []deckhandv1alpha1.UpdateScatterTerm{{Key: "zone"}}, want: "u.scatterStrategy[0].value"},
		"scatter bad value": {scatter: []deckhandv1alpha1.UpdateScatterTerm{{Key: "zone", Value: "a/b"}}, want: "u.scatterStrategy[0].value"},
		"scatter twice":     {scatter: []deckhandv1alpha1.UpdateScatterTerm{{Key: "zone", Value: "a"}, {Key: "zone", Value: "a"}}, want: "u.scatterStrategy[1]"},
	}
	u := field.NewPath("u")
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			errs := Validate(tc.pri, u.Child("priorityStrategy"), tc.scatter, u.Child("scatterStrategy"))
			switch {
			case tc.want == "" && len(errs) > 0:
				t.Fatalf("unexpected errors: %v", errs)
			case tc.want != "" && len(errs) == 0:
				t.Fatalf("no error, want one at %s", tc.want)
			case tc.want != "" && errs[0].Field != tc.want:
				t.Fatalf("first error at %s (%v), want %s", errs[0].Field, errs, tc.want)
			case tc.want != "" && !strings.Contains(errs.ToAggregate().Error(), tc.want):
				t.Fatalf("message %q does not name %s", errs.ToAggregate().Error(), tc.want)
			}
		})
	}
}
