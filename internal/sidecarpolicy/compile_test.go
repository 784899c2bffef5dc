package sidecarpolicy

import (
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func scs(name string, mutate func(*deckhandv1alpha1.SidecarSet)) *deckhandv1alpha1.SidecarSet {
	s := &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: deckhandv1alpha1.SidecarSetSpec{
		Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: name + "-c", Image: "x:1"}}},
	}}
	if mutate != nil {
		mutate(s)
	}
	return s
}

// The parts of the compiled policy that are not CEL, row by row (the CEL is
// proven on the API server by the differential test).
func TestCompile(t *testing.T) {
	opts := Options{ProtectedNamespaces: []string{"kube-system", "deckhand-system"}}
	cases := map[string]struct {
		set              *deckhandv1alpha1.SidecarSet
		wantNamespaceSel *metav1.LabelSelector
		wantConditions   []string
		wantName         string
	}{
		"cluster-wide": {
			set: scs("log", nil),
			wantNamespaceSel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "deckhand-system"}},
				{Key: "apps.deckhand.dev/sidecarset-injection", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"disabled"}}}},
			wantConditions: nil,
			wantName:       "deckhand-sidecarset-log",
		},
		"namespace and namespaceSelector, paused": {
			set: scs("log", func(s *deckhandv1alpha1.SidecarSet) {
				s.Spec.Namespace = "shop"
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
				s.Spec.InjectionStrategy.Paused = true
			}),
			wantNamespaceSel: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}, MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"shop"}},
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "deckhand-system"}},
				{Key: "apps.deckhand.dev/sidecarset-injection", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"disabled"}}}},
			wantConditions: []string{"injection-not-paused"},
			wantName:       "deckhand-sidecarset-log",
		},
		"a name too long for the prefix": {
			set: scs(strings.Repeat("a", 250), nil),
			wantNamespaceSel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "deckhand-system"}},
				{Key: "apps.deckhand.dev/sidecarset-injection", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"disabled"}}}},
			wantConditions: nil,
			wantName:       "deckhand-sidecarset-" + strings.Repeat("a", 253-20-17) + "-",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, b := Compile(tc.set, nil, opts)
			if !strings.HasPrefix(p.Name, tc.wantName) || len(p.Name) > 253 || b.Name != p.Name || b.Spec.PolicyName != p.Name {
				t.Errorf("names: policy %q binding %q binds %q; want %q...", p.Name, b.Name, b.Spec.PolicyName, tc.wantName)
			}
			mc := p.Spec.MatchConstraints
			if !apiequality.Semantic.DeepEqual(mc.NamespaceSelector, tc.wantNamespaceSel) {
				t.Errorf("namespaceSelector %+v, want %+v", mc.NamespaceSelector, tc.wantNamespaceSel)
			}
			if !apiequality.Semantic.DeepEqual(mc.ObjectSelector, tc.set.Spec.Selector) {
				t.Errorf("objectSelector %+v, want the SidecarSet's selector", mc.ObjectSelector)
			}
			var conds []string
			for _, c := range p.Spec.MatchConditions {
				conds = append(conds, c.Name)
			}
			if strings.Join(conds, ",") != strings.Join(tc.wantConditions, ",") {
				t.Errorf("matchConditions %v, want %v", conds, tc.wantConditions)
			}
			if r := mc.ResourceRules; len(r) != 1 || len(r[0].Operations) != 1 || r[0].Operations[0] != admissionregistrationv1.Create || r[0].Resources[0] != "pods" {
				t.Errorf("resource rules %+v, want pod CREATE only", r)
			}
			if *p.Spec.FailurePolicy != admissionregistrationv1.Ignore || p.Spec.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy {
				t.Errorf("failurePolicy %s reinvocation %s, want Ignore and Never", *p.Spec.FailurePolicy, p.Spec.ReinvocationPolicy)
			}
		})
	}
}

// The order in which peers are given does not change the policy, and a
// peer's container names enter it (a change to a peer recompiles it).
func TestCompilePeers(t *testing.T) {
	s := scs("b", nil)
	a, c := scs("a", nil), scs("c", nil)
	p1, _ := Compile(s, []*deckhandv1alpha1.SidecarSet{a, c}, Options{ProtectedNamespaces: []string{"deckhand-system", "kube-system"}})
	p2, _ := Compile(s, []*deckhandv1alpha1.SidecarSet{c, a, s}, Options{ProtectedNamespaces: []string{"deckhand-system", "kube-system"}})
	if !apiequality.Semantic.DeepEqual(p1, p2) {
		t.Error("the compiled policy depends on the order of its peers")
	}
	c.Spec.Containers[0].Name = "renamed"
	p3, _ := Compile(s, []*deckhandv1alpha1.SidecarSet{a, c}, Options{ProtectedNamespaces: []string{"deckhand-system", "kube-system"}})
	if apiequality.Semantic.DeepEqual(p1, p3) {
		t.Error("a peer's container names do not enter the compiled policy")
	}
}
