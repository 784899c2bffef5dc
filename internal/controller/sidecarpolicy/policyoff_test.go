package sidecarpolicy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/sidecarpolicy"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestPolicyInjectionOffFallsBackToTheWebhook: without
// --sidecarset-policy-injection (the default install, which grants no
// permission on MutatingAdmissionPolicies) a Policy-mode SidecarSet says so
// in its condition, naming the flag, no policy is written, and the webhook
// injects it.
func TestPolicyInjectionOffFallsBackToTheWebhook(t *testing.T) {
	ns := env.Namespace(t)
	t.Cleanup(func() {
		env.StopManager()
		policyInjectionOff.Store(false)
		if _, err := env.StartManager(); err != nil {
			t.Errorf("restarting the manager: %v", err)
		}
	})
	env.StopManager()
	policyInjectionOff.Store(true)
	if _, err := env.StartManager(); err != nil {
		t.Fatal(err)
	}
	s := policySet("off-"+ns[len(ns)-5:], ns, "log:1")
	createSidecarSet(t, s)
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		got := &deckhandv1alpha1.SidecarSet{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: s.Name}, got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == sidecarpolicy.ReasonPolicyAPIUnavailable &&
			strings.Contains(c.Message, "--sidecarset-policy-injection"), nil
	}, "the SidecarSet reports InjectionPolicyReady=False naming --sidecarset-policy-injection")
	waitCached(t, s.Name, 1)
	if img, _ := podImage(t, ns, "off"); img != "log:1" {
		t.Fatalf("with policy injection off a new pod got log image %q, want log:1 from the webhook", img)
	}
	if _, _, err := getPolicy(ctxT(t), s.Name); !apierrors.IsNotFound(err) {
		t.Fatalf("with policy injection off a policy exists (err %v)", err)
	}
}
