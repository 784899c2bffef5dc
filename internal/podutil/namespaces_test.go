package podutil

import (
	"os"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The kustomize patch that keeps the pod webhooks out of the protected
// namespaces must name exactly ProtectedNamespaces, and leave out the
// namespaces labelled out of every SidecarSet.
func TestWebhookNamespaceSelectorMatchesProtectedNamespaces(t *testing.T) {
	raw, err := os.ReadFile("../../config/webhook/pod_webhook_namespace_selector.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Webhooks) == 0 {
		t.Fatal("the patch has no webhooks")
	}
	for _, w := range cfg.Webhooks {
		sel := w.NamespaceSelector
		if sel == nil || len(sel.MatchLabels) != 0 || len(sel.MatchExpressions) != 2 {
			t.Fatalf("webhook %s: namespaceSelector %+v, want two NotIn expressions", w.Name, sel)
		}
		e := sel.MatchExpressions[0]
		if e.Key != "kubernetes.io/metadata.name" || e.Operator != metav1.LabelSelectorOpNotIn || !slices.Equal(e.Values, ProtectedNamespaces) {
			t.Errorf("webhook %s: %s %s %v, want kubernetes.io/metadata.name NotIn %v", w.Name, e.Key, e.Operator, e.Values, ProtectedNamespaces)
		}
		o := sel.MatchExpressions[1]
		if want := SidecarSetOptOut(); o.Key != want.Key || o.Operator != want.Operator || !slices.Equal(o.Values, want.Values) {
			t.Errorf("webhook %s: %s %s %v, want %s %s %v", w.Name, o.Key, o.Operator, o.Values, want.Key, want.Operator, want.Values)
		}
	}
}

// Deckhand's own namespace is protected only if it is installed where
// DeckhandNamespace says.
func TestDefaultInstallNamespace(t *testing.T) {
	raw, err := os.ReadFile("../../config/default/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Namespace string `json:"namespace"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		t.Fatal(err)
	}
	if k.Namespace != DeckhandNamespace {
		t.Fatalf("config/default installs into %q, DeckhandNamespace is %q", k.Namespace, DeckhandNamespace)
	}
	if !slices.Contains(ProtectedNamespaces, DeckhandNamespace) || !slices.Contains(ProtectedNamespaces, metav1.NamespaceSystem) {
		t.Fatalf("ProtectedNamespaces %v must hold %s and %s", ProtectedNamespaces, metav1.NamespaceSystem, DeckhandNamespace)
	}
}

// The manager's own namespace comes from POD_NAMESPACE first: the shipped
// Deployment sets it from the downward API.
func TestOwnNamespaceFromPodNamespace(t *testing.T) {
	t.Setenv("POD_NAMESPACE", "team-ops")
	if got := OwnNamespace(); got != "team-ops" {
		t.Errorf("OwnNamespace() = %q with POD_NAMESPACE=team-ops", got)
	}
}
