package hostile

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// nestedMapsExpr is five nested map calls over a 20-element list: 20^5
// evaluations, seconds of CPU and hundreds of MiB of lists were it run.
func nestedMapsExpr() string {
	var l []string
	for i := range 20 {
		l = append(l, strconv.Itoa(i))
	}
	list := "[" + strings.Join(l, ",") + "]"
	expr := "e"
	for _, v := range []string{"e", "d", "c", "b", "a"} {
		expr = list + ".map(" + v + ", " + expr + ")"
	}
	return "double(size(" + expr + ")) * cpu"
}

// sidecarSetWithCPUExpr is a SidecarSet whose sidecar's CPU limit is expr.
func sidecarSetWithCPUExpr(expr string) *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: deckhandv1alpha1.GroupVersion.String(), Kind: "SidecarSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "cel-" + utilrand.String(6)},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "cel"}},
			Containers: []deckhandv1alpha1.SidecarContainer{{
				Container: corev1.Container{Name: "proxy", Image: "registry.example/proxy:1"},
				ResourcesPolicy: &deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{
					Limits: &deckhandv1alpha1.ResourceExprPair{CPU: expr},
				}},
			}},
		},
	}
}

const cpuExprField = "spec.containers[0].resourcesPolicy.resourceExpr.limits.cpu"

// fastest runs try n times and returns the shortest time it took: the
// machine's load adds to any one run, never takes from it.
func fastest(n int, try func()) time.Duration {
	best := time.Duration(1<<63 - 1)
	for range n {
		start := time.Now()
		try()
		best = min(best, time.Since(start))
	}
	return best
}

// TestResourcesPolicyExpressionUnderBudget: an expression that would
// iterate millions of times is refused at its field before it runs, in
// in well under a second and without the manager's memory moving, whether it comes
// through the API server (a dry-run create) or straight to the webhook
// port without a client certificate. A documented expression is accepted.
// The time bound is a second: before the budget the same expression took
// 4 to 6 s, refused it takes milliseconds on a quiet machine, and 180 ms
// was seen with four suites and other builds sharing two cores.
func TestResourcesPolicyExpressionUnderBudget(t *testing.T) {
	const refusalBound = time.Second
	ensureDeckhand(t)
	expr := nestedMapsExpr()
	t.Logf("expression of %d characters", len(expr))
	gvk := deckhandv1alpha1.GroupVersion.WithKind("SidecarSet")
	gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: "sidecarsets"}
	const path = "/validate-apps-deckhand-dev-v1alpha1-sidecarset"

	// A documented expression (docs/sidecarset.md, "Sizing sidecars") is
	// accepted both ways. This also runs the validator once before the
	// manager's memory is read, so that what is measured below is not the
	// first use of its code.
	documented := sidecarSetWithCPUExpr("max(cpu * 0.1, quantity('50m'))")
	if err := suite.Client.Create(ctx(t, time.Minute), documented, client.DryRunAll); err != nil {
		t.Errorf("the documented expression is refused: %v", err)
	}
	code, body, err := postWebhook(t, path, bytes.NewReader(forgedReview(t, gvk, gvr, "", documented.Name, documented)), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if resp := reviewResponse(t, code, body); !resp.Allowed {
		t.Errorf("the documented expression is refused at the webhook port: %s", body)
	}
	// And a refused one, through both ways, for the same reason.
	refused := sidecarSetWithCPUExpr("cpu *")
	_ = suite.Client.Create(ctx(t, time.Minute), refused, client.DryRunAll)
	_, _, _ = postWebhook(t, path, bytes.NewReader(forgedReview(t, gvk, gvr, "", refused.Name, refused)), time.Minute)
	before := managerRSS(t)

	var apiErr error
	took := fastest(3, func() {
		apiErr = suite.Client.Create(ctx(t, time.Minute), sidecarSetWithCPUExpr(expr), client.DryRunAll)
	})
	switch {
	case apiErr == nil:
		t.Errorf("the API server accepted the expression")
	case !apierrors.IsInvalid(apiErr) || !strings.Contains(apiErr.Error(), cpuExprField):
		t.Errorf("refused with %v, want an Invalid answer naming %s", apiErr, cpuExprField)
	default:
		t.Logf("through the API server, refused in %v: %v", took, apiErr)
	}
	if took > refusalBound {
		t.Errorf("the dry-run create took %v", took)
	}

	var postErr error
	ss := sidecarSetWithCPUExpr(expr)
	review := forgedReview(t, gvk, gvr, "", ss.Name, ss)
	took = fastest(3, func() {
		code, body, postErr = postWebhook(t, path, bytes.NewReader(review), time.Minute)
	})
	if postErr != nil {
		t.Fatal(postErr)
	}
	resp := reviewResponse(t, code, body)
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, cpuExprField) {
		t.Errorf("the webhook answered %s, want a denial naming %s", body, cpuExprField)
	} else {
		t.Logf("straight to the webhook port, refused in %v: %s", took, resp.Result.Message)
	}
	if took > refusalBound {
		t.Errorf("the webhook took %v", took)
	}

	after := managerRSS(t)
	t.Logf("manager RSS %d MiB before, %d MiB after", before>>20, after>>20)
	if after-before > 10<<20 {
		t.Errorf("the manager's RSS grew by %d MiB", (after-before)>>20)
	}
}
