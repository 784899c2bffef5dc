package v1alpha1

// SidecarSetPatchPolicyType says how a patchPodMetadata entry treats an
// annotation the pod already has.
// +kubebuilder:validation:Enum=Retain;Overwrite;MergePatchJson
type SidecarSetPatchPolicyType string

const (
	// SidecarSetRetainPatchPolicy sets an annotation only where the pod does
	// not have it yet: the pod's own value wins.
	SidecarSetRetainPatchPolicy SidecarSetPatchPolicyType = "Retain"
	// SidecarSetOverwritePatchPolicy sets an annotation whatever the pod
	// had.
	SidecarSetOverwritePatchPolicy SidecarSetPatchPolicyType = "Overwrite"
	// SidecarSetMergePatchJSONPatchPolicy treats the value as a JSON object
	// merged (RFC 7386 JSON merge patch) into the JSON object the pod's
	// annotation holds; a pod without the annotation gets the value as it
	// is.
	SidecarSetMergePatchJSONPatchPolicy SidecarSetPatchPolicyType = "MergePatchJson"
)

// SidecarSetPatchPodMetadata is a set of annotations and labels injection
// writes on the pods it injects (and an in-place update writes again), and
// how it treats the values the pods already have.
// +kubebuilder:validation:XValidation:rule="has(self.annotations) || has(self.labels)",message="name at least one annotation or label"
type SidecarSetPatchPodMetadata struct {
	// Annotations to set on the pod. Only keys the manager's
	// --sidecarset-pod-metadata-allowlist allows are accepted; keys under
	// apps.deckhand.dev/ are Deckhand's own and never are.
	// +kubebuilder:validation:MinProperties=1
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// Labels to set on the pod, under patchPolicy Retain or Overwrite. Only
	// keys the manager's --sidecarset-pod-label-allowlist allows are
	// accepted, never a key of the SidecarSet's own selector nor one under
	// apps.deckhand.dev/. A label can move a pod into or out of Services,
	// PodDisruptionBudgets, NetworkPolicies, workload controllers and other
	// SidecarSets.
	// +kubebuilder:validation:MinProperties=1
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// PatchPolicy is Retain (the default: an annotation the pod has keeps its
	// value), Overwrite (the SidecarSet's value replaces it) or
	// MergePatchJson (the value, a JSON object, is merged into the pod's
	// JSON object value as an RFC 7386 merge patch).
	// +kubebuilder:default=Retain
	// +optional
	PatchPolicy SidecarSetPatchPolicyType `json:"patchPolicy,omitempty"`
}
