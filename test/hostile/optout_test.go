package hostile

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// A namespace labelled apps.deckhand.dev/sidecarset-injection=disabled is
// out of every SidecarSet, a mandatory cluster-wide one included: the API
// server never calls the pod webhook for its pods (the webhook counts no
// request), its pods keep their own containers, and the SidecarSet counts
// them neither as matched nor as not injected.
func TestNamespaceOptsOutOfSidecarSets(t *testing.T) {
	d := replaceManager(t, "deckhand-opt-out")
	in, out := testutil.Namespace(t, suite.Client), testutil.Namespace(t, suite.Client)
	testutil.Update(t, suite.Client, time.Minute, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: out}}, func(ns *corev1.Namespace) {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[deckhandv1alpha1.SidecarSetInjectionLabel] = deckhandv1alpha1.SidecarSetInjectionDisabled
	})
	label := "optout-" + utilrand.String(5)
	s := injectedSidecarSet("", label, corev1.Container{Name: "audit", Image: "registry.example/audit:1"})
	createSidecarSet(t, s)
	waitInjecting(t, in, label, "audit")
	c := ctx(t, 2*time.Minute)
	podRequests := func() float64 {
		return metricSum(scrape(t, d), "controller_runtime_webhook_requests_total", fmt.Sprintf("webhook=%q", inject.PodWebhookPath))
	}

	before := podRequests()
	skipped := labelledPod(out, "skipped", label)
	testutil.Create(c, t, suite.Client, skipped)
	if podutil.FindContainer(skipped.Spec.Containers, "audit") != nil {
		t.Errorf("a pod of the opted-out namespace got the sidecar: %v", skipped.Spec.Containers)
	}
	if after := podRequests(); after != before {
		t.Errorf("the pod webhook counted %v requests for a pod of the opted-out namespace, want none", after-before)
	}

	// The same pod in another namespace is injected, and counted.
	injected := labelledPod(in, "injected", label)
	testutil.Create(c, t, suite.Client, injected)
	if podutil.FindContainer(injected.Spec.Containers, "audit") == nil {
		t.Errorf("a pod of %s was not injected: %v", in, injected.Spec.Containers)
	}
	if after := podRequests(); after <= before {
		t.Errorf("the pod webhook counts %v requests after injecting a pod, %v before", after, before)
	}
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		err := suite.Client.Get(ctx, client.ObjectKeyFromObject(s), s)
		return err == nil && s.Status.ObservedGeneration == s.Generation && s.Status.MatchedPods == 1 && s.Status.NotInjectedPods == 0, err
	}, "the SidecarSet counts the one pod outside the opted-out namespace, and no pod it did not inject (status %v)", lazy(func() string { return fmt.Sprintf("%+v", s.Status) }))
}
