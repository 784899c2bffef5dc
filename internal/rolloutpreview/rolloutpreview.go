// Package rolloutpreview is what a rollout preview says of each pod, for
// SidecarSets and PodSets alike: the vocabulary `kubectl deckhand plan`
// prints. The previews themselves are the controllers' own
// (sidecarset.Preview, podset.Preview), so that they run the same planners.
package rolloutpreview

// PodAction is what a rollout does to a pod.
type PodAction string

const (
	// UpdateInPlace: the pod's (sidecar) container images are patched.
	UpdateInPlace PodAction = "UpdateInPlace"
	// ResizeInPlace: the sidecar images are patched and their CPU or memory
	// resized in place, or a resize already started is finished.
	ResizeInPlace PodAction = "ResizeInPlace"
	// Recreate: the pod is deleted or evicted, and its controller creates
	// it anew from the new template or with the new sidecars; an eviction's
	// PodDisruptionBudgets are checked by the API server at that moment.
	Recreate PodAction = "Recreate"
	// ScaleDown: the pod is deleted to bring a PodSet to spec.replicas.
	ScaleDown PodAction = "ScaleDown"
	// None: the rollout leaves the pod as it is (Pod.Why says why).
	None PodAction = "None"
)

// Pod is what a rollout would do to one pod.
type Pod struct {
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	Action    PodAction `json:"action"`
	// Step is the pass (sync) that acts on the pod, from 1; 0 for none.
	Step int `json:"step,omitempty"`
	// Why says what leaves the pod alone; empty when a pass acts on it.
	Why string `json:"why,omitempty"`
}
