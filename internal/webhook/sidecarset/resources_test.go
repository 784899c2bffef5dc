package sidecarset_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// TestResourcesPolicyInjected: on the real API server, the sidecar's
// requests and limits are computed from the pod's matching containers, and
// the API server accepts the pod it gets.
func TestResourcesPolicyInjected(t *testing.T) {
	ns := env.Namespace(t)
	proxy := sidecar("proxy", "proxy:1")
	proxy.ResourcesPolicy = &deckhandv1alpha1.ResourcesPolicy{
		TargetContainersNameRegex: "^app",
		ResourceExpr: deckhandv1alpha1.ResourceExpr{
			Limits:   &deckhandv1alpha1.ResourceExprPair{CPU: "cpu * 0.5", Memory: "max(memory * 0.25, quantity('128Mi'))"},
			Requests: &deckhandv1alpha1.ResourceExprPair{CPU: "max(cpu * 0.1, quantity('50m'))", Memory: "memory * 0.25"},
		},
	}
	createSidecarSet(t, newSidecarSet("resources-"+ns, ns, "res", proxy))

	p := newPod(ns, "web", map[string]string{"app": "res"}, "app", "app-worker", "debug")
	set := func(i int, lim, req string) {
		p.Spec.Containers[i].Resources = corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(lim), corev1.ResourceMemory: resource.MustParse("1Gi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(req), corev1.ResourceMemory: resource.MustParse("256Mi")},
		}
	}
	set(0, "2", "1")
	set(1, "1", "200m")
	set(2, "8", "4") // not a target
	got := createPod(t, p)
	c := podutil.FindContainer(got.Spec.Containers, "proxy")
	if c == nil {
		t.Fatalf("no proxy sidecar: %v", names(got.Spec.Containers))
	}
	want := map[string]string{"limits.cpu": "1500m", "limits.memory": "512Mi", "requests.cpu": "120m", "requests.memory": "128Mi"}
	gotRes := map[string]string{}
	for k, q := range c.Resources.Limits {
		gotRes["limits."+string(k)] = q.String()
	}
	for k, q := range c.Resources.Requests {
		gotRes["requests."+string(k)] = q.String()
	}
	for k, v := range want {
		if gotRes[k] != v {
			t.Errorf("proxy %s = %q, want %q (all: %v)", k, gotRes[k], v, gotRes)
		}
	}
}

// TestResourcesPolicyValidation: CEL errors, a bad regex, resources set
// together with resourcesPolicy and Policy mode are refused, naming the
// field.
func TestResourcesPolicyValidation(t *testing.T) {
	ns := env.Namespace(t)
	cases := []struct {
		name   string
		policy deckhandv1alpha1.ResourcesPolicy
		fixed  bool
		mode   deckhandv1alpha1.InjectionMode
		field  string
		words  string
	}{
		{"CEL syntax", deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "cpu *"}}}, false, "",
			"spec.containers[0].resourcesPolicy.resourceExpr.limits.cpu", "Syntax error"},
		{"CEL type", deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{Requests: &deckhandv1alpha1.ResourceExprPair{Memory: "'1Gi'"}}}, false, "",
			"spec.containers[0].resourcesPolicy.resourceExpr.requests.memory", "double"},
		{"bad quantity", deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: &deckhandv1alpha1.ResourceExprPair{Memory: "quantity('lots')"}}}, false, "",
			"spec.containers[0].resourcesPolicy.resourceExpr.limits.memory", "quantity"},
		{"no expression", deckhandv1alpha1.ResourcesPolicy{}, false, "", "spec.containers[0].resourcesPolicy.resourceExpr", "at least one"},
		{"regex", deckhandv1alpha1.ResourcesPolicy{TargetContainersNameRegex: "(", ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "cpu"}}}, false, "",
			"spec.containers[0].resourcesPolicy.targetContainersNameRegex", ""},
		{"with fixed resources", deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "cpu"}}}, true, "",
			"spec.containers[0].resources", "resourcesPolicy"},
		{"Policy mode", deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "cpu"}}}, false, deckhandv1alpha1.PolicyInjection,
			"spec.containers[0].resourcesPolicy", "spec.injectionMode: Policy does not support"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := sidecar("proxy", "proxy:1")
			c.ResourcesPolicy = tc.policy.DeepCopy()
			if tc.fixed {
				c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
			}
			s := newSidecarSet("bad-res-"+ns+"-"+string(rune('a'+i)), ns, "web", c)
			s.Spec.InjectionMode = tc.mode
			wantRefused(t, s, tc.field, tc.words)
		})
	}
}
