package sidecarpolicy_test

import (
	"net/http"
	"strings"
	"testing"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
)

// TestWithoutThePodWebhookOnlyPolicyModeInjects: a manager started with
// --sidecarset-pod-webhook=false serves no pod webhook (Deckhand is off the
// pod create path), refuses a SidecarSet that asks for Webhook mode naming
// spec.injectionMode, and a SidecarSet that leaves the mode unset is
// injected by its policy.
func TestWithoutThePodWebhookOnlyPolicyModeInjects(t *testing.T) {
	ns := env.Namespace(t)
	restartManagerWith(t, &withoutPodWebhook, true)

	req, err := http.NewRequest(http.MethodPost, inject.PodWebhookPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, pattern := env.Manager().GetWebhookServer().WebhookMux().Handler(req); pattern != "" {
		t.Errorf("the webhook server serves %s (pattern %q); want no pod webhook", inject.PodWebhookPath, pattern)
	}

	webhookMode := policySet("nohook-webhook-"+ns[len(ns)-5:], ns, "log:1")
	webhookMode.Spec.InjectionMode = deckhandv1alpha1.WebhookInjection
	err = env.Client.Create(ctxT(t), webhookMode)
	if err == nil {
		t.Cleanup(func() { _ = env.Client.Delete(ctxT(t), webhookMode) })
		t.Fatal("a Webhook-mode SidecarSet was accepted by a manager that serves no pod webhook")
	}
	if !strings.Contains(err.Error(), "spec.injectionMode") || !strings.Contains(err.Error(), "--sidecarset-pod-webhook=false") {
		t.Errorf("refusal %q does not name spec.injectionMode and the flag", err)
	}

	unset := policySet("nohook-"+ns[len(ns)-5:], ns, "log:1")
	unset.Spec.InjectionMode = ""
	createSidecarSet(t, unset)
	waitPolicyReady(t, unset.Name)
	eventuallyInjects(t, ns, logImage, "log:1")
	if img, rev := podImage(t, ns, "nohook"); img != "log:1" || rev == "" {
		t.Fatalf("a new pod got log image %q and revision %q, want log:1 from the policy with its record", img, rev)
	}
}
