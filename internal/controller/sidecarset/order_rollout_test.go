package sidecarset_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// rolloutOrder creates the scenario's pods (name -> extra labels), waits
// until they run proxy:1, changes the image to proxy:2 and returns the
// order in which the pods got the new image in their spec.
func rolloutOrder(t *testing.T, sc *scenario, pods [][2]string) []string {
	t.Helper()
	for _, np := range pods {
		p := sc.pod(np[0])
		for k, v := range labelsOf(np[1]) {
			p.Labels[k] = v
		}
		sc.create(p)
	}
	n := int32(len(pods))
	sc.waitStatus(90*time.Second, fmt.Sprintf("all %d pods updated and ready", n), func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == n && s.Status.UpdatedReadyPods == n
	})
	watch := watchAvailability(t, sc.ns, "proxy", "proxy:2")
	defer watch.stop()
	sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "proxy:2" })
	sc.waitStatus(3*time.Minute, "every pod on proxy:2 and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.UpdatedReadyPods == n
	})
	maxUnavailable, order := watch.result()
	if maxUnavailable > 1 {
		t.Errorf("%d pods were unavailable at once, maxUnavailable is 1", maxUnavailable)
	}
	return order
}

// labelsOf parses "k=v,k2=v2".
func labelsOf(s string) map[string]string {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// With maxUnavailable 1 a rollout updates one pod at a time, in the order
// of updateStrategy.priorityStrategy: here canary pods (weight 50), then
// web pods (weight 10), then the rest; pods of equal weight by name.
func TestRolloutFollowsPriorityStrategy(t *testing.T) {
	sc := newScenario(t, "prio", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.MaxUnavailable = podCount(1)
		s.Spec.UpdateStrategy.PriorityStrategy = &deckhandv1alpha1.UpdatePriorityStrategy{
			WeightPriority: []deckhandv1alpha1.UpdatePriorityWeightTerm{
				{Weight: 10, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}}},
				{Weight: 50, MatchSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "canary"}}},
			},
		}
	})
	got := rolloutOrder(t, sc, [][2]string{
		{"a-db", "tier=db"}, {"b-web", "tier=web"}, {"c-canary", "tier=canary"}, {"d-web", "tier=web"}, {"e-canary", "tier=canary"},
	})
	if want := []string{"c-canary", "e-canary", "b-web", "d-web", "a-db"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("pods got the new image in the order %v, want %v", got, want)
	}
}

// updateStrategy.scatterStrategy spreads the pods of each zone through the
// rollout: consecutive updates alternate between zones, where names alone
// would update one zone after the other.
func TestRolloutFollowsScatterStrategy(t *testing.T) {
	sc := newScenario(t, "scatter", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.MaxUnavailable = podCount(1)
		s.Spec.UpdateStrategy.ScatterStrategy = []deckhandv1alpha1.UpdateScatterTerm{{Key: "zone", Value: "*"}}
	})
	got := rolloutOrder(t, sc, [][2]string{
		{"a1", "zone=a"}, {"a2", "zone=a"}, {"a3", "zone=a"}, {"b1", "zone=b"}, {"b2", "zone=b"}, {"b3", "zone=b"},
	})
	if want := []string{"a1", "b1", "a2", "b2", "a3", "b3"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("pods got the new image in the order %v, want %v", got, want)
	}
}
