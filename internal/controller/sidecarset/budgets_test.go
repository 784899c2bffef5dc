package sidecarset

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestPlanRolloutBudgets pins how a pass fits PodDisruptionBudgets and
// maxUnavailableScope Workload.
func TestPlanRolloutBudgets(t *testing.T) {
	// p builds a pod of namespace ns with podWith's flags, labelled
	// app=<owner> and controlled by the workload owner.
	p := func(name, flags, owner string) *podState {
		st := podWith(name, flags)
		st.pod.Namespace, st.pod.UID = "shop", types.UID("uid-"+name)
		st.pod.Labels = map[string]string{"app": owner}
		yes := true
		st.pod.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: owner, UID: types.UID(owner), Controller: &yes}}
		return st
	}
	pdb := func(app string, allowed int32) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
	}
	one := intstr.FromInt32(1)
	cases := map[string]struct {
		pods       []*podState
		pdbs       []policyv1.PodDisruptionBudget
		max        int
		byWorkload bool
		inPlace    []string
		blocked    []string
	}{
		"a budget that allows nothing holds its pods; the others go on": {
			pods: []*podState{p("a1", "r", "a"), p("b1", "r", "b")}, pdbs: []policyv1.PodDisruptionBudget{pdb("a", 0)}, max: 2,
			inPlace: []string{"b1"}, blocked: []string{"a1"}},
		"a pass takes no more than a budget allows": {
			pods: []*podState{p("a1", "r", "a"), p("a2", "r", "a"), p("a3", "r", "a")}, pdbs: []policyv1.PodDisruptionBudget{pdb("a", 1)}, max: 3,
			inPlace: []string{"a1"}, blocked: []string{"a2", "a3"}},
		"a pod not ready is no disruption": {
			pods: []*podState{p("a1", "", "a"), p("a2", "r", "a")}, pdbs: []policyv1.PodDisruptionBudget{pdb("a", 0)}, max: 2,
			inPlace: []string{"a1"}, blocked: []string{"a2"}},
		"one budget for the SidecarSet": {
			pods: []*podState{p("a1", "r", "a"), p("a2", "r", "a"), p("b1", "r", "b")}, max: 1,
			inPlace: []string{"a1"}},
		"by workload: each its own budget": {
			pods: []*podState{p("a1", "r", "a"), p("a2", "r", "a"), p("b1", "r", "b")}, max: 1, byWorkload: true,
			inPlace: []string{"a1", "b1"}},
		"by workload: an updated pod that is not ready holds back its own workload only": {
			pods: []*podState{p("a1", "cu", "a"), p("a2", "r", "a"), p("b1", "r", "b")}, max: 1, byWorkload: true,
			inPlace: []string{"b1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			budgets, err := newDisruptionBudgets(tc.pods, func(string) ([]policyv1.PodDisruptionBudget, error) { return tc.pdbs, nil })
			if err != nil {
				t.Fatal(err)
			}
			plan := planRollout(rolloutInput{pods: tc.pods, maxUnavailable: tc.max, byWorkload: tc.byWorkload, maxUnavailableValue: &one, budgets: budgets})
			if got := podNames(plan.inPlace); !reflect.DeepEqual(got, tc.inPlace) {
				t.Errorf("inPlace = %v, want %v", got, tc.inPlace)
			}
			if got := podNames(plan.disruptionBlocked); !reflect.DeepEqual(got, tc.blocked) {
				t.Errorf("disruptionBlocked = %v, want %v", got, tc.blocked)
			}
		})
	}
	// A pod two budgets cover needs room in both.
	pods := []*podState{p("a1", "r", "a")}
	both := []policyv1.PodDisruptionBudget{pdb("a", 1), func() policyv1.PodDisruptionBudget { d := pdb("a", 0); d.Name = "a-strict"; return d }()}
	budgets, _ := newDisruptionBudgets(pods, func(string) ([]policyv1.PodDisruptionBudget, error) { return both, nil })
	if by, ok := budgets.take(pods[0].pod); ok || by != "a-strict" {
		t.Errorf("take = %q, %v; want blocked by a-strict", by, ok)
	}
	var none *disruptionBudgets
	if _, ok := none.take(&corev1.Pod{}); !ok {
		t.Error("no budgets must allow every update")
	}
}
