package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PodSetStatusMaxPodNames is the most pod names status.podNames and
// status.disruptionBlockedPods list. Pod names are at most 63 characters,
// so a status at the limit stays near 330 KB, well under the API server's
// object size limit (etcd's 1.5 MiB request limit by default), however
// many replicas the PodSet has. Keep in step with the MaxItems markers.
const PodSetStatusMaxPodNames = 5000

// Labels, annotations and condition types of PodSet.
const (
	// PodSetRevisionLabel is set on every pod a PodSet creates. Its value is
	// the hash of the pod template the pod was created (or last updated in
	// place) from; status.updateRevision holds the hash of the current template.
	PodSetRevisionLabel = "apps.deckhand.dev/podset-revision"

	// PodSetInPlaceHashAnnotation is set on every pod a PodSet creates. Its
	// value is the hash of the pod template with every container image left
	// out: two revisions whose templates have the same value differ only in
	// container images, so a pod can move between them by an in-place image
	// update.
	PodSetInPlaceHashAnnotation = "apps.deckhand.dev/podset-inplace-hash"

	// PodSetInPlaceUpdateAnnotation is set on a pod while an in-place image
	// update is in progress. Its value is a JSON object recording the target
	// revision, the time of the update and the image ID each updated
	// container reported before the update. The pod counts as unavailable
	// until the kubelet reports the new images and the pod is Ready again.
	PodSetInPlaceUpdateAnnotation = "apps.deckhand.dev/podset-inplace-update"

	// PodDeletionCostAnnotation is the well-known annotation
	// (controller.kubernetes.io/pod-deletion-cost) that ranks pods on
	// scale-down: pods with a lower cost are deleted first.
	PodDeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

	// PodSetRollbackToAnnotation, set on a PodSet by a user, asks the
	// controller to roll the template back: its value is a revision number
	// (the .revision of a ControllerRevision of the PodSet), a
	// ControllerRevision name, a revision hash, or "previous" (the newest
	// revision whose template differs from the current one). The controller
	// copies that revision's template into spec.template and removes the
	// annotation in one write.
	PodSetRollbackToAnnotation = "apps.deckhand.dev/rollback-to"

	// PodSetNameLabel is set on every ControllerRevision a PodSet creates;
	// its value is the PodSet's name (`kubectl get controllerrevisions -l
	// apps.deckhand.dev/podset=web`).
	PodSetNameLabel = "apps.deckhand.dev/podset"

	// PodSetAvailableCondition is True when at least
	// spec.replicas - maxUnavailable pods are available.
	PodSetAvailableCondition = "Available"
	// PodSetProgressingCondition reports whether the PodSet is still scaling
	// or rolling out its template (reason Scaling or Updating) or has
	// converged (reason Complete).
	PodSetProgressingCondition = "Progressing"
	// PodSetReplicaFailureCondition is True when the last sync failed to
	// create (reason FailedCreate) or delete (reason FailedDelete) pods. It
	// is removed on the next sync that succeeds.
	PodSetReplicaFailureCondition = "ReplicaFailure"
)

// PodSetPodReplacement names how a rolling update removes a pod it
// recreates from the new template.
// +kubebuilder:validation:Enum=Delete;Evict
type PodSetPodReplacement string

const (
	// DeletePodSetPodReplacement deletes the pod, within maxUnavailable, as
	// a Deployment's rollout scales down its old ReplicaSet.
	DeletePodSetPodReplacement PodSetPodReplacement = "Delete"
	// EvictPodSetPodReplacement evicts the pod through the Eviction API, so
	// that PodDisruptionBudgets are honoured: an eviction the API server
	// refuses (429) is retried later, never forced.
	EvictPodSetPodReplacement PodSetPodReplacement = "Evict"
)

// PodSetUpdateStrategyType names how a PodSet replaces pods after its
// template changes.
// +kubebuilder:validation:Enum=RollingUpdate;OnDelete
type PodSetUpdateStrategyType string

const (
	// RollingUpdatePodSetStrategyType replaces old-revision pods
	// automatically, within maxUnavailable and maxSurge, in place when only
	// container images changed and inPlaceIfPossible is true.
	RollingUpdatePodSetStrategyType PodSetUpdateStrategyType = "RollingUpdate"
	// OnDeletePodSetStrategyType never touches existing pods: a pod moves to
	// the new template only when it is deleted (by a user) and recreated.
	OnDeletePodSetStrategyType PodSetUpdateStrategyType = "OnDelete"
)

// PodSetUpdateStrategy says how a template change reaches existing pods.
// +kubebuilder:validation:XValidation:rule="!has(self.maxUnavailable) || !has(self.maxSurge) || !(string(self.maxUnavailable) in ['0', '0%'] && string(self.maxSurge) in ['0', '0%'])",message="maxUnavailable and maxSurge must not both be zero",fieldPath=".maxUnavailable"
type PodSetUpdateStrategy struct {
	// Type is RollingUpdate (the default: the PodSet replaces old pods
	// itself) or OnDelete (old pods are replaced only when deleted).
	// +kubebuilder:default=RollingUpdate
	// +optional
	Type PodSetUpdateStrategyType `json:"type,omitempty"`

	// MaxUnavailable is the number (e.g. 2) or percentage of spec.replicas
	// (e.g. "25%", rounded down) of pods that may be unavailable during a
	// rolling update. Defaults to 25%. Must not be zero when maxSurge is zero.
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^(100|[1-9][0-9]|[0-9])%$')",message="must be a non-negative integer or a percentage between 0% and 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MaxSurge is the number (e.g. 1) or percentage of spec.replicas (e.g.
	// "25%", rounded up) of pods that may be created above spec.replicas
	// during a rolling update that recreates pods. Defaults to 25%.
	// Terminating pods count against it.
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="must be a non-negative integer or a percentage such as 25%"
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// Partition is the number of pods the rolling update leaves on old
	// revisions: the update stops once at most this many old-revision pods
	// remain. New pods are always created from the current template.
	// Defaults to 0 (update every pod). At most 1000000.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	Partition *int32 `json:"partition,omitempty"`

	// InPlaceIfPossible, when true (the default), updates a pod in place
	// (patching its container images, keeping its name, UID, IP and node)
	// when the only difference between its template and the current one is
	// container images. Any other change recreates the pod. While true, the
	// pods created list the in-place update readiness gate, which the PodSet
	// writes once per new pod before it is Ready; false creates pods
	// without it.
	// +kubebuilder:default=true
	// +optional
	InPlaceIfPossible *bool `json:"inPlaceIfPossible,omitempty"`

	// InPlaceUpdateGracePeriodSeconds is how long an in-place update keeps
	// a pod out of its Services' endpoints before it patches the images:
	// the PodSet writes the pod's readiness gate
	// apps.deckhand.dev/in-place-update-ready False, waits until the pod is
	// no longer Ready (the kubelet has taken it out of its endpoints) and
	// then this long, restarts the containers, and writes the gate True once
	// they are ready again. Defaults to 1; at most 300. A pod created before the gate
	// existed (without it in spec.readinessGates) is updated at once.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	// +optional
	InPlaceUpdateGracePeriodSeconds *int32 `json:"inPlaceUpdateGracePeriodSeconds,omitempty"`

	// PodReplacement is how a rolling update removes a pod it recreates:
	// Delete (the default) or Evict, through the Eviction API, which
	// honours PodDisruptionBudgets: a refused eviction waits and is retried,
	// and status.disruptionBlockedPods names the pods waiting. Scale-downs
	// always delete, as a ReplicaSet's do; in-place updates are not
	// evictions.
	// +kubebuilder:default=Delete
	// +optional
	PodReplacement PodSetPodReplacement `json:"podReplacement,omitempty"`

	// OnFailure is what the PodSet does when a rollout fails, that is when
	// it makes no progress for spec.progressDeadlineSeconds: Pause (the
	// default) updates no further pod; Rollback returns the pods to
	// status.stableRevision. Either way spec.template is left as it is, the
	// RolloutFailed condition and a Warning RolloutFailed Event say so, and
	// a change of the template starts a new rollout.
	// +kubebuilder:default=Pause
	// +optional
	OnFailure RolloutFailurePolicy `json:"onFailure,omitempty"`
}

// PodSetSpec is the desired state of a PodSet.
// +kubebuilder:validation:XValidation:rule="!has(self.progressDeadlineSeconds) || !has(self.minReadySeconds) || self.progressDeadlineSeconds > self.minReadySeconds",message="must be greater than minReadySeconds",fieldPath=".progressDeadlineSeconds"
// +kubebuilder:validation:XValidation:rule="!has(self.template.spec.restartPolicy) || self.template.spec.restartPolicy == 'Always'",message="only \"Always\" is supported",fieldPath=".template.spec.restartPolicy"
type PodSetSpec struct {
	// Replicas is the number of pods the PodSet keeps running. Defaults to 1.
	// Changed through the scale subresource by `kubectl scale` and the
	// HorizontalPodAutoscaler. At most the manager's --max-podset-replicas
	// (10000 by default), checked at admission for both.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// Image, when set without selector and template, is the image of the
	// default template's one container (see Selector).
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Image string `json:"image,omitempty"`

	// Selector is a label query over the pods the PodSet owns. It must match
	// the template's labels and cannot be changed after creation. Matching
	// pods without a controller are adopted; owned pods that stop matching
	// are released. A PodSet created with neither selector nor template gets
	// a default one of each from Deckhand's admission webhook: the selector
	// app.kubernetes.io/name=podset, app.kubernetes.io/instance=<name>, and a
	// template of those labels with one container "main" running image (or
	// registry.k8s.io/pause:3.10).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="selector is immutable"
	// +required
	Selector *metav1.LabelSelector `json:"selector"`

	// Template describes the pods the PodSet creates. A change to it is
	// rolled out according to updateStrategy. Its restartPolicy must be Always.
	// +required
	Template corev1.PodTemplateSpec `json:"template"`

	// MinReadySeconds is how long a pod must be Ready, without any of its
	// containers crashing, before it counts as available. Defaults to 0; at
	// most 86400 (a day).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// UpdateStrategy says how a template change reaches existing pods.
	// +kubebuilder:default={}
	// +optional
	UpdateStrategy PodSetUpdateStrategy `json:"updateStrategy,omitempty"`

	// Paused stops the rollout of template changes where it is, as
	// `kubectl rollout pause` does for a Deployment: pods already on the new
	// template stay there, no other pod is updated or replaced until it is
	// cleared (an in-place update already under way finishes). Scaling and
	// adoption go on while paused: new pods are created from the current
	// template, and a scale-down removes old-revision pods first. While a
	// rollout is held back, Progressing is Unknown with reason Paused and
	// Ready is False with reason UpdatePaused.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// ProgressDeadlineSeconds is how long a rollout or scaling may go
	// without progress (a pod created, updated or becoming available, an old
	// pod removed) before Progressing turns False with reason
	// ProgressDeadlineExceeded, as for a Deployment. A rollout of a new
	// template that times out has failed: updateStrategy.onFailure says
	// what follows. A paused PodSet does not time out. Defaults to 600; must be greater than minReadySeconds, and at
	// most 604800 (a week).
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// RevisionHistoryLimit is how many ControllerRevisions of old templates
	// the PodSet keeps for rollback, besides those of the current template
	// and of templates pods still run. Defaults to 10; at most 100.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// PodSetStatus is the observed state of a PodSet.
type PodSetStatus struct {
	// Replicas is the number of active (not terminating, not finished) pods
	// the PodSet owns.
	// +optional
	Replicas int32 `json:"replicas"`

	// FullyLabeledReplicas is the number of active pods whose labels include
	// every label of the template.
	// +optional
	FullyLabeledReplicas int32 `json:"fullyLabeledReplicas,omitempty"`

	// ReadyReplicas is the number of active pods with the Ready condition.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// AvailableReplicas is the number of active pods Ready for at least
	// spec.minReadySeconds and not in the middle of an in-place update.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// TerminatingReplicas is the number of owned pods being deleted. They are
	// not counted in replicas.
	// +optional
	TerminatingReplicas int32 `json:"terminatingReplicas,omitempty"`

	// UpdatedReplicas is the number of active pods on updateRevision.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`

	// PodNames lists the names of the active pods, sorted: all of them up to
	// 5000 active pods, the first 5000 in sorted order beyond that (replicas
	// counts them all). Only the controller writes it, as a whole (atomic:
	// the API server does not track each name's owner in managedFields).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5000
	PodNames []string `json:"podNames,omitempty"`

	// Selector is spec.selector in its string form (e.g. "app=web"), used by
	// the scale subresource and the HorizontalPodAutoscaler.
	// +optional
	Selector string `json:"selector,omitempty"`

	// CurrentRevision is the revision every pod had when the last rollout
	// completed. It becomes updateRevision once every pod is updated. Its
	// ControllerRevision is named <podset>-<currentRevision>.
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`

	// UpdateRevision is the hash of the current template; pods created or
	// updated from it carry it in the apps.deckhand.dev/podset-revision label.
	// Its ControllerRevision, holding the template, is named
	// <podset>-<updateRevision>.
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`

	// CollisionCount counts the hash collisions met when naming
	// ControllerRevisions (a revision of the same name with another
	// template, or not the PodSet's); it enters the revision hash so that
	// the next name differs, as for a StatefulSet.
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`

	// StableRevision is the last revision whose rollout completed with
	// every pod on it and available; onFailure Rollback returns the pods to
	// it.
	// +optional
	StableRevision string `json:"stableRevision,omitempty"`

	// FailedRevision is updateRevision when its rollout failed (no progress
	// for spec.progressDeadlineSeconds); the PodSet then acts as
	// updateStrategy.onFailure says until the template changes.
	// +optional
	FailedRevision string `json:"failedRevision,omitempty"`

	// LastProgressTime is when the rollout or scaling last made progress;
	// Progressing turns False (ProgressDeadlineExceeded) when it is older
	// than spec.progressDeadlineSeconds.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`

	// DisruptionBlockedPods names the pods whose eviction (podReplacement:
	// Evict) a PodDisruptionBudget refused on the last attempt; they are
	// retried later. Sorted; at most 5000 are listed.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=5000
	DisruptionBlockedPods []string `json:"disruptionBlockedPods,omitempty"`

	// ObservedGeneration is the metadata.generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions are Available, Progressing, (on failure) ReplicaFailure and
	// RolloutFailed, and
	// the summary conditions Ready, Reconciling and Stalled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PodSet keeps a number of pods running from a template, like a ReplicaSet,
// and rolls template changes out to them itself: recreating pods within
// maxUnavailable/maxSurge, or patching container images in place.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=pset,categories=all;deckhand
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".spec.replicas",description="Number of pods wanted"
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=".status.replicas",description="Number of active pods"
// +kubebuilder:printcolumn:name="Ready-Pods",type=integer,JSONPath=".status.readyReplicas",description="Number of Ready pods"
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=".status.updatedReplicas",description="Number of pods on the current template"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the PodSet has reached its spec: the status of its Ready condition"
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="Why the PodSet is or is not Ready"
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=".spec.paused",priority=1,description="Whether the rollout of template changes is paused"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type PodSet struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the PodSet.
	// +required
	Spec PodSetSpec `json:"spec"`

	// Status is the observed state of the PodSet, written by Deckhand.
	// +optional
	Status PodSetStatus `json:"status,omitempty"`
}

// PodSetList is a list of PodSets.
// +kubebuilder:object:root=true
type PodSetList struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the PodSets.
	Items []PodSet `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PodSet{}, &PodSetList{})
}
