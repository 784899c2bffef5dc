package sidecarcontrol

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func res(limits, requests string) corev1.ResourceRequirements {
	parse := func(s string) corev1.ResourceList {
		if s == "" {
			return nil
		}
		out := corev1.ResourceList{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			out[corev1.ResourceName(k)] = resource.MustParse(v)
		}
		return out
	}
	return corev1.ResourceRequirements{Limits: parse(limits), Requests: parse(requests)}
}

func named(name string, r corev1.ResourceRequirements) NamedResources {
	return NamedResourcesOf(name, &r)
}

// TestResourcesPolicyCompute: the aggregate (sum or max over the containers
// the regex selects), percentages and bounds, unlimited targets, rounding,
// and a request never above its limit.
func TestResourcesPolicyCompute(t *testing.T) {
	apps := []NamedResources{
		named("main", res("cpu=2,memory=1Gi", "cpu=1,memory=512Mi")),
		named("main-helper", res("cpu=1,memory=1Gi", "cpu=500m")),
		named("debug", res("", "cpu=100m,memory=64Mi")),
	}
	pair := func(cpu, mem string) *deckhandv1alpha1.ResourceExprPair {
		return &deckhandv1alpha1.ResourceExprPair{CPU: cpu, Memory: mem}
	}
	cases := map[string]struct {
		policy       deckhandv1alpha1.ResourcesPolicy
		wantLimits   string // "cpu=..,memory=.." in canonical form, "" for none
		wantRequests string
		wantNone     bool
	}{
		"sum of the matching containers, 50% with a floor": {
			policy: deckhandv1alpha1.ResourcesPolicy{TargetContainersNameRegex: "^main",
				ResourceExpr: deckhandv1alpha1.ResourceExpr{
					Limits:   pair("cpu * 0.5", "max(memory * 0.25, quantity('256Mi'))"),
					Requests: pair("max(cpu * 0.1, quantity('50m'))", "memory * 0.5")}},
			// limits: cpu 3 -> 1500m; memory 2Gi*0.25 = 512Mi. requests: cpu 1.5*0.1 = 150m;
			// memory 512Mi + 1Gi (main-helper's request defaults to its limit) = 1.5Gi * 0.5 = 768Mi,
			// lowered to the 512Mi limit.
			wantLimits: "cpu=1500m,memory=512Mi", wantRequests: "cpu=150m,memory=512Mi",
		},
		"max mode, and a ceiling": {
			policy: deckhandv1alpha1.ResourcesPolicy{TargetContainerMode: deckhandv1alpha1.ResourcesTargetContainerModeMax, TargetContainersNameRegex: "^main",
				ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: pair("min(cpu, quantity('1500m'))", "memory")}},
			wantLimits: "cpu=1500m,memory=1Gi",
		},
		"an unlimited target leaves the limit unset": {
			policy:       deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: pair("cpu", "memory"), Requests: pair("cpu * 0.5", "")}},
			wantRequests: "cpu=800m",
		},
		"a request above the computed limit is lowered to it": {
			policy:     deckhandv1alpha1.ResourcesPolicy{TargetContainersNameRegex: "^main$", ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: pair("quantity('100m')", ""), Requests: pair("cpu", "")}},
			wantLimits: "cpu=100m", wantRequests: "cpu=100m",
		},
		"rounded up to a millicore and a byte; a non-positive result sets nothing": {
			policy:     deckhandv1alpha1.ResourcesPolicy{TargetContainersNameRegex: "^main$", ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: pair("cpu / 3.0", "0.0 - memory")}},
			wantLimits: "cpu=667m",
		},
		"no matching container": {
			policy:   deckhandv1alpha1.ResourcesPolicy{TargetContainersNameRegex: "^nothing$", ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: pair("cpu", "")}},
			wantNone: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rp, errs := CompileResourcesPolicy(&tc.policy)
			if len(errs) > 0 {
				t.Fatalf("compile: %v", errs)
			}
			got, ok := rp.Compute(apps)
			if ok == tc.wantNone {
				t.Fatalf("computed %v, want none: %v", ok, tc.wantNone)
			}
			if s := listString(got.Limits); s != tc.wantLimits {
				t.Errorf("limits %s, want %s", s, tc.wantLimits)
			}
			if s := listString(got.Requests); s != tc.wantRequests {
				t.Errorf("requests %s, want %s", s, tc.wantRequests)
			}
		})
	}
}

func listString(l corev1.ResourceList) string {
	var parts []string
	for _, k := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := l[k]; ok {
			parts = append(parts, string(k)+"="+q.String())
		}
	}
	return strings.Join(parts, ",")
}

// TestResourcesPolicyCompileErrors: each broken policy is reported at its
// field.
func TestResourcesPolicyCompileErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		policy deckhandv1alpha1.ResourcesPolicy
		field  string
	}{
		"syntax":           {deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "cpu *"}}}, "resourceExpr.limits.cpu"},
		"type":             {deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{Requests: &deckhandv1alpha1.ResourceExprPair{Memory: "'1Gi'"}}}, "resourceExpr.requests.memory"},
		"int times double": {deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "cpu * 2"}}}, "resourceExpr.limits.cpu"},
		"bad quantity":     {deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "quantity('lots')"}}}, "resourceExpr.limits.cpu"},
		"no expression":    {deckhandv1alpha1.ResourcesPolicy{}, "resourceExpr"},
		"regex":            {deckhandv1alpha1.ResourcesPolicy{TargetContainersNameRegex: "(", ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "cpu"}}}, "targetContainersNameRegex"},
		"mode":             {deckhandv1alpha1.ResourcesPolicy{TargetContainerMode: "avg", ResourceExpr: deckhandv1alpha1.ResourceExpr{Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "cpu"}}}, "targetContainerMode"},
	} {
		t.Run(name, func(t *testing.T) {
			_, errs := CompileResourcesPolicy(&tc.policy)
			if len(errs) != 1 || errs[0].Field != tc.field {
				t.Errorf("errors %+v, want one at %s", errs, tc.field)
			}
		})
	}
}

// nestedMaps is an expression of five nested map calls over a 20-element
// list: 20^5 evaluations, seconds of CPU and hundreds of MiB were it run.
func nestedMaps() string {
	var l []string
	for i := range 20 {
		l = append(l, strconv.Itoa(i))
	}
	list := "[" + strings.Join(l, ",") + "]"
	return "double(size(" + list + ".map(a, " + list + ".map(b, " + list + ".map(c, " + list + ".map(d, " + list + ".map(e, e)))))))"
}

// TestResourcesPolicyBudget: an expression that iterates, or is longer than
// the CRD allows, is refused at its field before it runs; the documented
// examples still compile.
func TestResourcesPolicyBudget(t *testing.T) {
	for name, expr := range map[string]string{
		"nested maps":   nestedMaps(),
		"one filter":    "double(size([1.0, 2.0].filter(x, x > cpu)))",
		"too long":      "cpu" + strings.Repeat(" + cpu", maxExprLength/6+1),
		"exists in map": "[cpu].exists(x, x > 1.0) ? cpu : memory",
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, errs := CompileResourcesPolicy(&deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{
				Limits: &deckhandv1alpha1.ResourceExprPair{CPU: expr}}})
			if d := time.Since(start); d > 100*time.Millisecond {
				t.Errorf("refusing took %v", d)
			}
			if len(errs) != 1 || errs[0].Field != "resourceExpr.limits.cpu" {
				t.Fatalf("errors %+v, want one at resourceExpr.limits.cpu", errs)
			}
			t.Logf("%s: %s", name, errs[0].Message)
		})
	}
	// docs/sidecarset.md, "Sizing sidecars".
	_, errs := CompileResourcesPolicy(&deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{
		Limits:   &deckhandv1alpha1.ResourceExprPair{CPU: "cpu * 0.5", Memory: "max(memory * 0.25, quantity('128Mi'))"},
		Requests: &deckhandv1alpha1.ResourceExprPair{CPU: "max(cpu * 0.1, quantity('50m'))", Memory: "min(memory * 0.25, quantity('1Gi'))"},
	}})
	if len(errs) != 0 {
		t.Errorf("the documented example is refused: %+v", errs)
	}
}

// TestResourcesPolicyBudgetAtInjection: a SidecarSet stored with an
// expression over budget (admitted before these limits, or with the webhook
// bypassed) gets no program for injection, so no pod ever evaluates it.
func TestResourcesPolicyBudgetAtInjection(t *testing.T) {
	s := &deckhandv1alpha1.SidecarSet{Spec: deckhandv1alpha1.SidecarSetSpec{Containers: []deckhandv1alpha1.SidecarContainer{
		{Container: corev1.Container{Name: "costly"}, ResourcesPolicy: &deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{
			Limits: &deckhandv1alpha1.ResourceExprPair{CPU: nestedMaps()}}}},
		{Container: corev1.Container{Name: "plain"}, ResourcesPolicy: &deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{
			Limits: &deckhandv1alpha1.ResourceExprPair{CPU: "cpu * 0.5"}}}},
	}}}
	start := time.Now()
	got := compileResources(s)
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("compiling took %v", d)
	}
	if _, ok := got["costly"]; ok {
		t.Errorf("the expression over budget was compiled for injection")
	}
	if _, ok := got["plain"]; !ok {
		t.Errorf("the plain expression was not compiled for injection")
	}
}
