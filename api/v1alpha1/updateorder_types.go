package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UpdatePriorityStrategy says which pods a rollout updates first, by their
// labels. Exactly one of weightPriority and orderPriority is set.
// +kubebuilder:validation:XValidation:rule="(has(self.weightPriority) && size(self.weightPriority) > 0) != (has(self.orderPriority) && size(self.orderPriority) > 0)",message="exactly one of weightPriority and orderPriority must be set"
type UpdatePriorityStrategy struct {
	// WeightPriority gives each pod the sum of the weights of the terms
	// whose matchSelector matches its labels; pods with a higher sum are
	// updated first, pods matching no term (sum 0) last.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	WeightPriority []UpdatePriorityWeightTerm `json:"weightPriority,omitempty"`

	// OrderPriority ranks pods by label keys: pods carrying the first key
	// are updated before pods carrying only the second, and so on; pods
	// carrying none of the keys go last. Among pods with the same key, the
	// one whose value ends in the larger integer goes first (a value
	// without a trailing integer counts as 0), so "wave-3" before "wave-1".
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	OrderPriority []UpdatePriorityOrderTerm `json:"orderPriority,omitempty"`
}

// UpdatePriorityWeightTerm adds weight to the priority of the pods its
// selector matches.
type UpdatePriorityWeightTerm struct {
	// Weight is added to the priority of each pod matchSelector matches,
	// between 0 and 100.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Weight int32 `json:"weight"`
	// MatchSelector chooses the pods, by label.
	MatchSelector metav1.LabelSelector `json:"matchSelector"`
}

// UpdatePriorityOrderTerm ranks pods by the value of one label.
type UpdatePriorityOrderTerm struct {
	// OrderedKey is a pod label key; see orderPriority.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	OrderedKey string `json:"orderedKey"`
}

// UpdateScatterTerm names the pods a rollout spreads out: those whose label
// key has value (any value, with "*": each value on its own).
type UpdateScatterTerm struct {
	// Key is a pod label key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// Value is the label's value, or "*" for each value the pods carry.
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value"`
}
