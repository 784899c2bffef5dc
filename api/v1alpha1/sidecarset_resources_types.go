package v1alpha1

// ResourcesTargetContainerMode says how the target containers' resources
// are aggregated for a resourcesPolicy.
// +kubebuilder:validation:Enum=sum;max
type ResourcesTargetContainerMode string

const (
	// ResourcesTargetContainerModeSum adds the target containers' values.
	ResourcesTargetContainerModeSum ResourcesTargetContainerMode = "sum"
	// ResourcesTargetContainerModeMax takes the largest of them.
	ResourcesTargetContainerModeMax ResourcesTargetContainerMode = "max"
)

// ResourcesPolicy computes a sidecar's CPU and memory requests and limits
// when a pod is injected, from the pod's own containers ("targets").
type ResourcesPolicy struct {
	// TargetContainerMode aggregates the targets' values: sum (the default)
	// or max.
	// +kubebuilder:default=sum
	// +optional
	TargetContainerMode ResourcesTargetContainerMode `json:"targetContainerMode,omitempty"`

	// TargetContainersNameRegex selects the targets among the pod's own
	// containers (not init containers) by name (RE2, unanchored: use ^...$
	// for a whole name). Default: every container.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	TargetContainersNameRegex string `json:"targetContainersNameRegex,omitempty"`

	// ResourceExpr are the CEL expressions that compute the sidecar's limits
	// and requests.
	ResourceExpr ResourceExpr `json:"resourceExpr"`
}

// ResourceExpr holds the expressions for limits and for requests.
type ResourceExpr struct {
	// Limits computes the sidecar's limits from the targets' aggregated
	// limits. A target without a limit for a resource makes the aggregate
	// unlimited: the sidecar then gets no limit for it.
	// +optional
	Limits *ResourceExprPair `json:"limits,omitempty"`
	// Requests computes the sidecar's requests from the targets' aggregated
	// requests (a target without a request counts 0).
	// +optional
	Requests *ResourceExprPair `json:"requests,omitempty"`
}

// ResourceExprPair holds a CEL expression per resource. Each sees the
// aggregate as the doubles `cpu` (cores) and `memory` (bytes), and the
// functions quantity('250m') (a Kubernetes quantity as a double), max(a, b)
// and min(a, b); it returns a double (or int): cores for cpu, bytes for
// memory, rounded up to a millicore or a byte. A result that is not
// positive sets nothing. Example: max(cpu * 0.2, quantity('50m')).
type ResourceExprPair struct {
	// CPU is the expression for the sidecar's CPU, in cores.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	CPU string `json:"cpu,omitempty"`
	// Memory is the expression for the sidecar's memory, in bytes.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Memory string `json:"memory,omitempty"`
}
