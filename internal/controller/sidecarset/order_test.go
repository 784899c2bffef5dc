package sidecarset

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/updateorder"
)

// TestPlanRolloutOrder pins how the priority and scatter strategies combine
// with the planner's not-ready-first rule, maxUnavailable and partition.
func TestPlanRolloutOrder(t *testing.T) {
	// A pod the rollout has not reached yet does not count against
	// maxUnavailable, ready or not.
	// p builds a pod on an old revision: flags r ready, x needs recreating
	// (not upgradable, controlled), labels "k=v,...".
	p := func(name, flags, ls string) *podState {
		l := map[string]string{}
		for _, kv := range strings.Split(ls, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				l[k] = v
			}
		}
		st := podWith(name, flags)
		st.pod.Labels = l
		return st
	}
	weights := &deckhandv1alpha1.UpdatePriorityStrategy{WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{
		{Weight: 10, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}},
	}}
	order := func(pri *deckhandv1alpha1.UpdatePriorityStrategy, scatter ...deckhandv1alpha1.UpdateScatterTerm) *updateorder.Order {
		o, err := updateorder.Compile(pri, scatter)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	cases := map[string]struct {
		in      rolloutInput
		inPlace []string
		evict   []string
	}{
		"without a strategy: not ready first, then by name": {
			in:      rolloutInput{pods: []*podState{p("a", "r", ""), p("b", "r", "tier=canary"), p("z", "", "")}, maxUnavailable: 2},
			inPlace: []string{"z", "a", "b"},
		},
		"priority goes before not-ready; the budget stops at the first ready pod it has no room for": {
			in: rolloutInput{pods: []*podState{p("a", "r", ""), p("b", "r", "tier=canary"), p("c", "r", "tier=canary"), p("z", "", "")},
				maxUnavailable: 2, order: order(weights)},
			inPlace: []string{"b", "c", "z"},
		},
		"not ready first within a priority": {
			in: rolloutInput{pods: []*podState{p("a", "r", "tier=canary"), p("b", "", "tier=canary"), p("c", "r", "")},
				maxUnavailable: 2, order: order(weights)},
			inPlace: []string{"b", "a", "c"},
		},
		"partition keeps the lowest priority": {
			in: rolloutInput{pods: []*podState{p("a", "r", ""), p("b", "r", ""), p("c", "r", "tier=canary")},
				maxUnavailable: 3, partition: 1, order: order(weights)},
			inPlace: []string{"c", "a"},
		},
		"scatter alternates zones": {
			in: rolloutInput{pods: []*podState{p("a1", "r", "zone=a"), p("a2", "r", "zone=a"), p("b1", "r", "zone=b"), p("b2", "r", "zone=b")},
				maxUnavailable: 2, order: order(nil, deckhandv1alpha1.UpdateScatterTerm{Key: "zone", Value: "*"})},
			inPlace: []string{"a1", "b1"},
		},
		"evictions follow the same order": {
			in: rolloutInput{pods: []*podState{p("a", "rx", ""), p("b", "rx", "tier=canary")},
				maxUnavailable: 1, evict: true, order: order(weights)},
			evict: []string{"b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan := planRollout(tc.in)
			if got := podNames(plan.inPlace); !reflect.DeepEqual(got, tc.inPlace) {
				t.Errorf("inPlace = %v, want %v", got, tc.inPlace)
			}
			if got := podNames(plan.evict); !reflect.DeepEqual(got, tc.evict) {
				t.Errorf("evict = %v, want %v", got, tc.evict)
			}
		})
	}
}
