package podutil

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// DeckhandNamespace is the namespace config/default installs Deckhand into.
const DeckhandNamespace = "deckhand-system"

// ProtectedNamespaces are the namespaces whose pods Deckhand's pod webhooks
// never see and no SidecarSet reaches: the control plane's and Deckhand's
// own, so that Deckhand can never block its own start (or kube-system's)
// whatever state it is in. config/webhook/pod_webhook_namespace_selector.yaml
// repeats them for the API server; a unit test keeps the two equal.
var ProtectedNamespaces = []string{metav1.NamespaceSystem, DeckhandNamespace}
