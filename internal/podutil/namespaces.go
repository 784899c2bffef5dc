package podutil

import (
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// DeckhandNamespace is the namespace config/default installs Deckhand into.
const DeckhandNamespace = "deckhand-system"

// ProtectedNamespaces are the namespaces whose pods Deckhand's pod webhooks
// never see and no SidecarSet reaches: the control plane's and Deckhand's
// own, so that Deckhand can never block its own start (or kube-system's)
// whatever state it is in. config/webhook/pod_webhook_namespace_selector.yaml
// repeats them for the API server; a unit test keeps the two equal.
var ProtectedNamespaces = []string{metav1.NamespaceSystem, DeckhandNamespace}

// SidecarSetOptOut is the namespaceSelector requirement that leaves out the
// namespaces labelled out of every SidecarSet
// (deckhandv1alpha1.SidecarSetInjectionLabel): the pod webhook's, as
// config/webhook/pod_webhook_namespace_selector.yaml and the chart write
// it, and the MutatingAdmissionPolicies' of Policy mode.
func SidecarSetOptOut() metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: deckhandv1alpha1.SidecarSetInjectionLabel, Operator: metav1.LabelSelectorOpNotIn,
		Values: []string{deckhandv1alpha1.SidecarSetInjectionDisabled}}
}

// serviceAccountNamespaceFile holds the namespace of a pod's service account.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// OwnNamespace is the namespace the manager runs in: the POD_NAMESPACE
// environment variable (the shipped Deployment sets it from the downward
// API), else the namespace of the pod's service account, else "" for a
// manager run outside a cluster. Nothing in the install hard-codes the
// namespace, so this is how the manager finds its Secret, its Lease and the
// pods it must leave alone wherever it is installed.
func OwnNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	data, err := os.ReadFile(serviceAccountNamespaceFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}
