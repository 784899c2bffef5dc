package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Annotations Deckhand writes on the pods a SidecarSet injected.
const (
	// SidecarSetInjectedAnnotation lists, comma-separated and sorted, the
	// names of the SidecarSets whose containers were injected into the pod.
	SidecarSetInjectedAnnotation = "apps.deckhand.dev/sidecarsets"
	// SidecarSetHashAnnotation is a JSON object mapping each injected
	// SidecarSet's name to the revision (hash of everything it injects,
	// images included) the pod carries and the sidecar containers it added.
	SidecarSetHashAnnotation = "apps.deckhand.dev/sidecarset-hash"
	// SidecarSetHashWithoutImageAnnotation is a JSON object mapping each
	// injected SidecarSet's name to the hash of everything it injects with
	// the images left out. Two revisions with equal hashes here differ only
	// in images, which is what allows an in-place update.
	SidecarSetHashWithoutImageAnnotation = "apps.deckhand.dev/sidecarset-hash-without-image"
	// SidecarSetSkipInjectionAnnotation on a pod set to "true" leaves the
	// pod out of the SidecarSets whose spec.injectionStrategy.allowOptOut
	// is true; the others inject it anyway. Deckhand sets it on the
	// synthetic pods it dry-runs to validate a SidecarSet's containers,
	// and honours it on the dry runs of its own ServiceAccount whatever
	// allowOptOut says.
	SidecarSetSkipInjectionAnnotation = "apps.deckhand.dev/sidecarset-skip-injection"
)

// The namespace label that opts a namespace out of every SidecarSet.
const (
	// SidecarSetInjectionLabel on a namespace, set to
	// SidecarSetInjectionDisabled, takes the namespace's pods out of every
	// SidecarSet, mandatory ones included: the namespaceSelector of the pod
	// webhook (and of the MutatingAdmissionPolicies of Policy mode) leaves
	// the namespace out, so the API server never calls Deckhand for its pods,
	// and the SidecarSet controller neither counts nor updates them. Only
	// who may update the namespace can set it.
	SidecarSetInjectionLabel = "apps.deckhand.dev/sidecarset-injection"
	// SidecarSetInjectionDisabled is the value of SidecarSetInjectionLabel
	// that opts a namespace out.
	SidecarSetInjectionDisabled = "disabled"
)

// PodInjectPolicy says where a sidecar goes relative to the pod's own containers.
// +kubebuilder:validation:Enum=BeforeAppContainer;AfterAppContainer
type PodInjectPolicy string

const (
	// BeforeAppContainer puts the sidecar before the pod's own containers
	// (or init containers), so that it starts first.
	BeforeAppContainer PodInjectPolicy = "BeforeAppContainer"
	// AfterAppContainer puts the sidecar after the pod's own containers
	// (or init containers).
	AfterAppContainer PodInjectPolicy = "AfterAppContainer"
)

// ShareVolumePolicyType turns the sharing of the app containers' volume mounts on or off.
// +kubebuilder:validation:Enum=enabled;disabled
type ShareVolumePolicyType string

const (
	// ShareVolumePolicyEnabled mounts every volumeMount of the pod's own
	// containers into the sidecar too.
	ShareVolumePolicyEnabled ShareVolumePolicyType = "enabled"
	// ShareVolumePolicyDisabled gives the sidecar only its own volumeMounts.
	ShareVolumePolicyDisabled ShareVolumePolicyType = "disabled"
)

// ShareVolumePolicy says whether a sidecar also mounts the app containers' volumes.
type ShareVolumePolicy struct {
	// Type is "enabled" (the sidecar gets every volumeMount of the pod's own
	// containers whose mountPath and volume it does not mount already) or
	// "disabled" (the default).
	// +kubebuilder:default=disabled
	// +optional
	Type ShareVolumePolicyType `json:"type,omitempty"`

	// Writable keeps each shared mount as the app container has it:
	// writable in the sidecar where it is writable in the app. false (the
	// default) mounts every shared volume readOnly in the sidecar, so that
	// sharing a volume to read the app's files never lets the sidecar
	// change them. The sidecar's own volumeMounts are unaffected.
	// +optional
	Writable bool `json:"writable,omitempty"`
}

// TransferEnvVar copies environment variables of an app container into the sidecar.
type TransferEnvVar struct {
	// SourceContainerName is the name of the pod's own container (or init
	// container) whose variables are copied. Exactly one of
	// sourceContainerName and sourceContainerNameFrom is set.
	// +optional
	SourceContainerName string `json:"sourceContainerName,omitempty"`
	// SourceContainerNameFrom reads the source container's name from the
	// pod's metadata: a label or annotation of the pod being injected.
	// +optional
	SourceContainerNameFrom *SourceContainerNameSource `json:"sourceContainerNameFrom,omitempty"`
	// EnvName is the name of the variable to copy. The whole definition is
	// copied (a value or a valueFrom) after the sidecar's own variables,
	// unless the sidecar defines that name itself or an earlier transfer
	// copied it. Nothing is copied when the source container or
	// variable does not exist. Exactly one of envName and envNames is set.
	// +optional
	EnvName string `json:"envName,omitempty"`
	// EnvNames are several variables to copy, in this order, each as envName.
	// +listType=atomic
	// +optional
	EnvNames []string `json:"envNames,omitempty"`
}

// SidecarContainer is a container injected into matching pods, with the
// policies that say where and how.
type SidecarContainer struct {
	// Container is the container to inject: every field of a pod's container.
	corev1.Container `json:",inline"`

	// PodInjectPolicy puts the sidecar before (the default) or after the
	// pod's own containers; for init containers, before or after the pod's
	// own init containers.
	// +kubebuilder:default=BeforeAppContainer
	// +optional
	PodInjectPolicy PodInjectPolicy `json:"podInjectPolicy,omitempty"`

	// ShareVolumePolicy says whether the sidecar also mounts the volumes the
	// pod's own containers mount (for example, to read their log files).
	// +optional
	ShareVolumePolicy ShareVolumePolicy `json:"shareVolumePolicy,omitempty"`

	// TransferEnv copies environment variables from the pod's own
	// containers into the sidecar when it is injected.
	// +listType=atomic
	// +optional
	TransferEnv []TransferEnvVar `json:"transferEnv,omitempty"`

	// ShareVolumeDevicePolicy says whether the sidecar also gets the
	// volumeDevices (raw block volumes) of the pod's own containers, as
	// shareVolumePolicy does for volumeMounts.
	// +optional
	ShareVolumeDevicePolicy *ShareVolumePolicy `json:"shareVolumeDevicePolicy,omitempty"`

	// ResourcesPolicy computes the sidecar's CPU and memory requests and
	// limits at injection from the pod's own containers, with CEL
	// expressions. Exclusive with resources.
	// +optional
	ResourcesPolicy *ResourcesPolicy `json:"resourcesPolicy,omitempty"`
	// UpgradeStrategy says how an image change reaches running pods:
	// ColdUpgrade (unset: the container restarts with the new image) or
	// HotUpgrade (the sidecar runs as two containers, <name>-1 and
	// <name>-2, and the new image starts beside the old one, which hands
	// over and is then parked on hotUpgradeEmptyImage). Containers only,
	// not init containers.
	// +optional
	UpgradeStrategy *SidecarContainerUpgradeStrategy `json:"upgradeStrategy,omitempty"`
}

// SidecarContainerUpgradeType is ColdUpgrade or HotUpgrade.
// +kubebuilder:validation:Enum=ColdUpgrade;HotUpgrade
type SidecarContainerUpgradeType string

const (
	// ColdUpgrade restarts the sidecar container with the new image.
	ColdUpgrade SidecarContainerUpgradeType = "ColdUpgrade"
	// HotUpgrade injects the sidecar as two containers, one working and one
	// idle on hotUpgradeEmptyImage; a new image starts in the idle one,
	// which takes over (its postStart hook migrates the state), and the old
	// one is then reset to the empty image.
	HotUpgrade SidecarContainerUpgradeType = "HotUpgrade"
)

// SidecarContainerUpgradeStrategy says how a sidecar container is upgraded.
type SidecarContainerUpgradeStrategy struct {
	// UpgradeType is ColdUpgrade (the default) or HotUpgrade. It cannot be
	// changed once the container exists.
	// +optional
	UpgradeType SidecarContainerUpgradeType `json:"upgradeType,omitempty"`

	// HotUpgradeEmptyImage is the image the idle container of a HotUpgrade
	// sidecar runs: one that does nothing and keeps running with the
	// sidecar's command, probes and lifecycle. Required for HotUpgrade,
	// forbidden otherwise, different from the sidecar's image, and it
	// cannot be changed once the container exists.
	// +optional
	HotUpgradeEmptyImage string `json:"hotUpgradeEmptyImage,omitempty"`
}

// InjectionMode says who injects a SidecarSet's sidecars into new pods.
// +kubebuilder:validation:Enum=Webhook;Policy
type InjectionMode string

const (
	// WebhookInjection: Deckhand's pod mutating webhook injects the pod.
	WebhookInjection InjectionMode = "Webhook"
	// PolicyInjection: the API server injects the pod itself, applying a
	// MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, Kubernetes
	// 1.36 and later) that Deckhand compiles from the SidecarSet. Pods are
	// injected while Deckhand is down.
	PolicyInjection InjectionMode = "Policy"
)

// SidecarSetUpdateStrategyType says whether injected pods follow SidecarSet image changes.
// +kubebuilder:validation:Enum=RollingUpdate;NotUpdate
type SidecarSetUpdateStrategyType string

const (
	// RollingUpdateSidecarSetStrategy updates sidecar images on running pods
	// in place, a few pods at a time.
	RollingUpdateSidecarSetStrategy SidecarSetUpdateStrategyType = "RollingUpdate"
	// NotUpdateSidecarSetStrategy never touches running pods: changes reach
	// only pods created afterwards.
	NotUpdateSidecarSetStrategy SidecarSetUpdateStrategyType = "NotUpdate"
)

// SidecarSetMaxUnavailableScope says what a SidecarSet's maxUnavailable
// counts.
type SidecarSetMaxUnavailableScope string

const (
	// MaxUnavailableScopeSidecarSet counts every pod the SidecarSet selects.
	MaxUnavailableScopeSidecarSet SidecarSetMaxUnavailableScope = "SidecarSet"
	// MaxUnavailableScopeWorkload counts the pods of each owning workload
	// apart.
	MaxUnavailableScopeWorkload SidecarSetMaxUnavailableScope = "Workload"
)

// SidecarSetRecreatePolicy says whether pods that cannot reach the latest
// revision in place are recreated.
// +kubebuilder:validation:Enum=Never;Evict
type SidecarSetRecreatePolicy string

const (
	// RecreateNever leaves pods that cannot be updated in place alone and
	// reports them (status.notUpdatablePods, status.notInjectedPods).
	RecreateNever SidecarSetRecreatePolicy = "Never"
	// RecreateEvict evicts them through the Eviction API, honouring
	// PodDisruptionBudgets, so that their controllers recreate them and the
	// pod webhook injects the latest revision.
	RecreateEvict SidecarSetRecreatePolicy = "Evict"
)

// SidecarSetUpdateStrategy says how sidecar changes roll out to running pods.
// +kubebuilder:validation:XValidation:rule="!(has(self.partition) && has(self.selector))",message="partition and selector are mutually exclusive",fieldPath=".partition"
type SidecarSetUpdateStrategy struct {
	// Type is RollingUpdate (the default: image changes are applied in place
	// to running pods) or NotUpdate (running pods are never changed).
	// +kubebuilder:default=RollingUpdate
	// +optional
	Type SidecarSetUpdateStrategyType `json:"type,omitempty"`

	// Paused stops the rollout where it is; pods already updated stay updated.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// Selector, if set, limits the rollout to the injected pods it matches.
	// Cannot be combined with partition.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// Partition is the number (or percentage, rounded up, of the pods that
	// carry this SidecarSet) of pods kept on their old revision: the rollout
	// stops once all but this many pods are updated. Default 0.
	// Cannot be combined with selector.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^0*(100|[1-9]?[0-9])%$')",message="must be at least 0, or a percentage between 0% and 100%"
	// +optional
	Partition *intstr.IntOrString `json:"partition,omitempty"`

	// MaxUnavailable is the number (or percentage, rounded up, of the pods
	// that carry this SidecarSet) of pods that may be not ready or in the
	// middle of an update at any time. Default 1; must be at least 1 (or 1%).
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=12
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^0*(100|[1-9][0-9]?)%$')",message="must be at least 1, or a percentage between 1% and 100%"
	// +kubebuilder:default=1
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// MaxUnavailableScope says what maxUnavailable counts. SidecarSet (the
	// default): every pod the SidecarSet selects, as one population.
	// Workload: the pods of each owning workload (the pods' controller: a
	// ReplicaSet, StatefulSet, PodSet...) apart, maxUnavailable resolved
	// against each one's pods, so that a budget sized for the whole rollout
	// never takes a small application down at once, and an application
	// whose pods are not ready holds back only itself. Either way a ready
	// pod is updated only while the PodDisruptionBudgets covering it allow a
	// disruption, and a pod that is not ready while this SidecarSet's
	// sidecars in it are ready (its own containers are the cause) does not
	// use the budget.
	// +kubebuilder:validation:Enum=SidecarSet;Workload
	// +kubebuilder:default=SidecarSet
	// +optional
	MaxUnavailableScope SidecarSetMaxUnavailableScope `json:"maxUnavailableScope,omitempty"`

	// Recreate says what happens to the pods the rollout cannot bring to the
	// latest revision in place (sidecars that differ in more than images and
	// CPU or memory resources) and to the selected pods that missed
	// injection: Never (the default) reports them; Evict evicts them through
	// the Eviction API, within maxUnavailable, partition, selector and
	// paused, and only when a PodDisruptionBudget allows it, so that their
	// controllers recreate them with the latest sidecars. A pod without a
	// controller owner that recreates it is never evicted. Evict requires
	// type RollingUpdate.
	// +kubebuilder:default=Never
	// +optional
	Recreate SidecarSetRecreatePolicy `json:"recreate,omitempty"`

	// InPlaceUpdateGracePeriodSeconds is how long an in-place update keeps
	// a pod out of its Services' endpoints before it patches the sidecar
	// images: the SidecarSet writes the pod's readiness gate
	// apps.deckhand.dev/in-place-update-ready False, waits until the pod is
	// no longer Ready (the kubelet has taken it out of its endpoints) and
	// then this long, restarts the sidecars, and writes the gate True once
	// they are ready again. Defaults to 1; at most 300. A pod injected before the gate
	// existed (without it in spec.readinessGates) is updated at once.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=300
	// +optional
	InPlaceUpdateGracePeriodSeconds *int32 `json:"inPlaceUpdateGracePeriodSeconds,omitempty"`

	// PriorityStrategy says which pods the rollout updates (or evicts)
	// first: by weights of label selectors (weightPriority) or by label
	// keys and their values' trailing integers (orderPriority). Among pods
	// of equal priority, pods that are not ready go first, then by
	// namespace and name. The pods partition keeps are the last in this
	// order.
	// +optional
	PriorityStrategy *UpdatePriorityStrategy `json:"priorityStrategy,omitempty"`

	// ScatterStrategy spreads the pods carrying the given labels through
	// the rollout instead of updating them one after another: with
	// [{key: zone, value: "*"}], consecutive updates alternate between
	// zones as far as the pods allow. Applied within each priority level.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	ScatterStrategy []UpdateScatterTerm `json:"scatterStrategy,omitempty"`

	// ProgressDeadlineSeconds is how long a rollout may go without an
	// additional pod becoming updated with its sidecars ready before it has
	// failed, as for a Deployment; onFailure says what follows. A paused
	// or held rollout does not time out. Defaults to 600; at most 604800
	// (a week).
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=604800
	// +optional
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// OnFailure is what the SidecarSet does when a rollout fails: Pause
	// (the default) updates no further pod, without setting paused;
	// Rollback returns the pods to status.stableRevision in place, within
	// maxUnavailable, without changing the spec. Either way the
	// RolloutFailed condition and a Warning RolloutFailed Event say so, and
	// a change of the revision (the sidecars the SidecarSet injects) starts
	// a new rollout.
	// +kubebuilder:default=Pause
	// +optional
	OnFailure RolloutFailurePolicy `json:"onFailure,omitempty"`
}

// SidecarSetInjectionStrategy says whether new pods are injected.
type SidecarSetInjectionStrategy struct {
	// Paused stops injection into new pods. Pods already injected keep their
	// sidecars and still follow image updates.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// AllowOptOut lets a pod leave this SidecarSet out by carrying the
	// annotation apps.deckhand.dev/sidecarset-skip-injection: "true". Off
	// (the default), the SidecarSet's sidecars are mandatory: every pod it
	// selects is injected whatever its annotations say.
	// +optional
	AllowOptOut bool `json:"allowOptOut,omitempty"`

	// Revision, if set, pins what new pods are injected with to one of the
	// SidecarSet's earlier revisions (its ControllerRevisions) instead of
	// the current spec, for all new pods (policy Always) or for those the
	// update strategy keeps back (policy Partial). Together with
	// updateStrategy.selector or partition this is a canary of the current
	// spec for new and running pods alike. A pinned revision that does not
	// exist (any more) is refused when the SidecarSet is written; one that
	// disappears later makes injection fall back to the latest revision and
	// the InjectionRevisionFound condition False.
	// +optional
	Revision *SidecarSetInjectRevision `json:"revision,omitempty"`
}

// SidecarSetSpec is the desired state of a SidecarSet.
type SidecarSetSpec struct {
	// Selector chooses the pods to inject by label. Required and must not be
	// empty (an empty selector would match every pod in the cluster).
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="selector must not be empty"
	Selector *metav1.LabelSelector `json:"selector"`

	// Namespace, if set, limits the SidecarSet to the pods of this namespace.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// NamespaceSelector, if set, limits the SidecarSet to the pods of the
	// namespaces whose labels it matches. With namespace, both must match.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// InitContainers are injected as init containers. An init container with
	// restartPolicy: Always is a Kubernetes native sidecar: it starts before
	// the pod's own containers and stops after them.
	// +listType=atomic
	// +optional
	InitContainers []SidecarContainer `json:"initContainers,omitempty"`

	// Containers are injected as containers. At least one container or init
	// container is required; names are unique across both lists.
	// +listType=atomic
	// +optional
	Containers []SidecarContainer `json:"containers,omitempty"`

	// Volumes are added to the pod; a volume of the same name the pod
	// already has wins.
	// +listType=atomic
	// +optional
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// ImagePullSecrets are added to the pod's imagePullSecrets; an entry of
	// the same name the pod already has wins.
	// +listType=atomic
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// UpdateStrategy says how image changes roll out to running pods: how
	// many at a time (maxUnavailable), which are held back (partition,
	// selector, paused), in which order (priorityStrategy, scatterStrategy)
	// and what happens to pods that cannot be updated in place (recreate).
	// +kubebuilder:default={}
	// +optional
	UpdateStrategy SidecarSetUpdateStrategy `json:"updateStrategy,omitempty"`

	// InjectionStrategy says whether new pods are injected.
	// +optional
	InjectionStrategy SidecarSetInjectionStrategy `json:"injectionStrategy,omitempty"`

	// InjectionMode says who injects new pods: Webhook (Deckhand's pod
	// webhook) or Policy (the API server, through a MutatingAdmissionPolicy
	// and binding Deckhand maintains, so that pods are injected while
	// Deckhand is down). Unset follows the manager's
	// --sidecarset-injection-mode flag (Webhook unless set). Where the API
	// server does not serve MutatingAdmissionPolicies, Policy falls back to
	// the webhook and the InjectionPolicyReady condition says so.
	// +optional
	InjectionMode InjectionMode `json:"injectionMode,omitempty"`

	// RevisionHistoryLimit is the number of ControllerRevisions the
	// SidecarSet keeps, the latest included (default 10; 0 keeps the latest
	// only). Revisions no pod carries and no injectionStrategy.revision pins
	// are deleted first, oldest first; one still in use is never deleted,
	// so the history can exceed the limit while pods carry old revisions.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=10
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
	// PatchPodMetadata are annotations and labels set on the pods the
	// SidecarSet injects, in order, each entry with its patch policy.
	// Annotation keys must be allowed by the manager's
	// --sidecarset-pod-metadata-allowlist, label keys by its
	// --sidecarset-pod-label-allowlist (both empty by default: none is).
	// Applied when a pod is injected and again when its sidecars are
	// updated in place; not part of the revision. Not supported with
	// injectionMode Policy.
	// +listType=atomic
	// +optional
	PatchPodMetadata []SidecarSetPatchPodMetadata `json:"patchPodMetadata,omitempty"`
}

// Annotations on pods carrying HotUpgrade sidecars.
const (
	// SidecarSetWorkingHotUpgradeContainerAnnotation is a JSON object
	// mapping each HotUpgrade sidecar's name to the container that works
	// for it (<name>-1 or <name>-2); the other one is idle.
	SidecarSetWorkingHotUpgradeContainerAnnotation = "apps.deckhand.dev/sidecarset-working-hotupgrade-container"
	// SidecarSetVersionAnnotationPrefix + a container's name holds that
	// container's version: the SidecarSet generation whose image it was
	// given, "0" while it idles on the empty image. The container reads it
	// as SIDECARSET_VERSION.
	SidecarSetVersionAnnotationPrefix = "version.sidecarset.apps.deckhand.dev/"
	// SidecarSetVersionAltAnnotationPrefix + a container's name holds the
	// version of the other container of the same HotUpgrade sidecar while
	// a hot upgrade is under way, "0" otherwise. The container reads it as
	// SIDECARSET_VERSION_ALT.
	SidecarSetVersionAltAnnotationPrefix = "versionalt.sidecarset.apps.deckhand.dev/"
)

// SidecarSetResizeAnnotation on a pod maps, as a JSON object, the name of
// each SidecarSet that brought the pod to its recorded revision through an
// in-place resize to that revision. While it names the pod's recorded
// revision, the SidecarSet controller keeps the sidecars' CPU and memory
// resources at the SidecarSet's through the pod resize subresource.
const SidecarSetResizeAnnotation = "apps.deckhand.dev/sidecarset-resize"

// SidecarSetsUpdatablePodCondition is the pod condition that tells a pod's
// owner whether the pod's sidecars can be updated in place. It is False,
// with reason NotUpdatableInPlace and a message naming each SidecarSet and
// why ("SidecarSet <name>: <why>", joined by "; "), while one or more
// SidecarSets count the pod in status.notUpdatablePods; True, with reason
// UpdatableInPlace, once none does any longer. A pod no SidecarSet ever
// counted does not carry it.
const SidecarSetsUpdatablePodCondition corev1.PodConditionType = "apps.deckhand.dev/SidecarSetsUpdatable"

// SidecarSet condition types.
const (
	// SidecarSetPodsInjectedCondition is True when every pod the SidecarSet
	// selects carries its sidecars, False when some do not (they were created
	// while the webhook was unavailable, while injection was paused, or before
	// the SidecarSet existed).
	SidecarSetPodsInjectedCondition = "PodsInjected"
	// SidecarSetPodsUpdatedCondition is True when every injected pod runs the
	// latest revision, False while a rollout is in progress, paused, held by
	// partition or selector, disabled (NotUpdate), or blocked.
	SidecarSetPodsUpdatedCondition = "PodsUpdated"
	// SidecarSetInPlaceUpdatableCondition is False when some injected pods
	// carry a revision that differs from the latest in more than images:
	// such changes reach only pods created afterwards.
	SidecarSetInPlaceUpdatableCondition = "InPlaceUpdatable"
	// SidecarSetInjectionPolicyReadyCondition is set in Policy mode only:
	// True when the MutatingAdmissionPolicy and binding that inject the
	// SidecarSet's current spec are in place, False (with the reason) when
	// they are not, or when the API server does not serve them and the
	// webhook injects instead.
	SidecarSetInjectionPolicyReadyCondition = "InjectionPolicyReady"
	// SidecarSetInjectionRevisionFoundCondition is set while
	// spec.injectionStrategy.revision pins a revision: True when the pinned
	// ControllerRevision exists, False when it does not, in which case new
	// pods get the latest revision.
	SidecarSetInjectionRevisionFoundCondition = "InjectionRevisionFound"
)

// SidecarSetStatus is the observed state of a SidecarSet, computed from the pods it selects.
type SidecarSetStatus struct {
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// MatchedPods is the number of active pods the SidecarSet selects that
	// carry its sidecars.
	MatchedPods int32 `json:"matchedPods"`

	// UpdatedPods is the number of matched pods on the latest revision whose
	// sidecar containers report the latest image and are ready.
	UpdatedPods int32 `json:"updatedPods"`

	// ReadyPods is the number of matched pods that are Ready.
	ReadyPods int32 `json:"readyPods"`

	// UpdatedReadyPods is the number of updated pods that are Ready.
	UpdatedReadyPods int32 `json:"updatedReadyPods"`

	// NotInjectedPods is the number of active pods the SidecarSet selects
	// that do not carry its sidecars: created while the pod webhook was
	// unavailable, while injection was paused, or before the SidecarSet
	// existed. Recreate them to inject them.
	// +optional
	NotInjectedPods int32 `json:"notInjectedPods"`

	// NotUpdatablePods is the number of matched pods whose revision differs
	// from the latest in more than images; they are updated only by
	// recreating them.
	// +optional
	NotUpdatablePods int32 `json:"notUpdatablePods"`

	// ResizingPods is the number of matched pods whose sidecar CPU or memory
	// resources are being changed in place (the pod resize subresource) and
	// whose kubelet has not yet reported the new resources.
	// +optional
	ResizingPods int32 `json:"resizingPods"`

	// EvictingPods is the number of pods the rollout evicted (recreate:
	// Evict) that are still terminating or whose controller has not created
	// their replacement yet.
	// +optional
	EvictingPods int32 `json:"evictingPods"`

	// DisruptionBlockedPods is the number of pods whose last eviction a
	// PodDisruptionBudget refused, or that the last rollout pass left on
	// their revision because a PodDisruptionBudget covering them allowed no
	// disruption; the rollout tries them again later.
	// +optional
	DisruptionBlockedPods int32 `json:"disruptionBlockedPods"`

	// UnmanagedPods is the number of pods that need recreating (recreate:
	// Evict) but have no controller owner that would recreate them; they
	// are never evicted. Recreate them by hand.
	// +optional
	UnmanagedPods int32 `json:"unmanagedPods"`

	// HotUpgradingPods is the number of matched pods in the middle of a hot
	// upgrade: a HotUpgrade sidecar's idle container does not run the empty
	// image (it is starting the new image, or being reset after a switch).
	// +optional
	HotUpgradingPods int32 `json:"hotUpgradingPods"`

	// LatestRevision is the hash of everything the SidecarSet injects
	// (containers, init containers, volumes, image pull secrets); injected
	// pods record it in the apps.deckhand.dev/sidecarset-hash annotation.
	// The ControllerRevision holding it carries it in its
	// apps.deckhand.dev/sidecarset-revision label and is named in
	// latestRevisionName.
	// +optional
	LatestRevision string `json:"latestRevision,omitempty"`

	// LatestRevisionName is the name of the ControllerRevision (in the
	// manager's namespace) that holds the latest
	// revision: <sidecarset>-<latestRevision> unless a name collision
	// changed it (collisionCount).
	// +optional
	LatestRevisionName string `json:"latestRevisionName,omitempty"`

	// CollisionCount is the number of times the name of the latest
	// revision's ControllerRevision was taken by another object; it is
	// folded into the name so that the next one is free.
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`

	// StableRevision is the last latestRevision whose rollout completed
	// with every pod updated and its sidecars ready.
	// +optional
	StableRevision string `json:"stableRevision,omitempty"`

	// FailedRevision is latestRevision when its rollout failed (no pod
	// became updated for updateStrategy.progressDeadlineSeconds); the
	// rollout then acts as updateStrategy.onFailure says until the
	// revision changes.
	// +optional
	FailedRevision string `json:"failedRevision,omitempty"`

	// LastProgressTime is when the rollout under way last had another pod
	// updated; unset when no rollout is under way.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`

	// Conditions are PodsInjected, PodsUpdated, InPlaceUpdatable, RolloutFailed (after a failed rollout), InjectionPolicyReady (Policy mode),
	// InjectionRevisionFound (while a revision is pinned), and the
	// summary conditions Ready, Reconciling and Stalled.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SidecarSet injects sidecar containers into the pods its selector matches
// when they are created, and rolls sidecar image changes out to running pods
// in place.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=scs,categories=deckhand
// +kubebuilder:printcolumn:name="MATCHED",type="integer",JSONPath=".status.matchedPods",description="Pods selected that carry the sidecars"
// +kubebuilder:printcolumn:name="UPDATED",type="integer",JSONPath=".status.updatedPods",description="Matched pods running the latest revision"
// +kubebuilder:printcolumn:name="READY-PODS",type="integer",JSONPath=".status.readyPods",description="Matched pods that are Ready"
// +kubebuilder:printcolumn:name="MODE",type=string,JSONPath=".spec.injectionMode",priority=1,description="Who injects new pods: Webhook or Policy (empty: the manager's default)"
// +kubebuilder:printcolumn:name="NOT-INJECTED",type="integer",JSONPath=".status.notInjectedPods",priority=1,description="Pods selected that do not carry the sidecars"
// +kubebuilder:printcolumn:name="EVICTING",type="integer",JSONPath=".status.evictingPods",priority=1,description="Pods evicted to be recreated, not yet replaced"
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`,description="Whether the SidecarSet has reached its spec: the status of its Ready condition"
// +kubebuilder:printcolumn:name="REASON",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1,description="Why the SidecarSet is or is not Ready"
// +kubebuilder:printcolumn:name="AGE",type="date",JSONPath=".metadata.creationTimestamp"
type SidecarSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec SidecarSetSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status SidecarSetStatus `json:"status,omitempty"`
}

// SidecarSetList is a list of SidecarSets.
//
// +kubebuilder:object:root=true
type SidecarSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the SidecarSets.
	Items []SidecarSet `json:"items"`
}

func init() {
	SchemeBuilder.Register(&SidecarSet{}, &SidecarSetList{})
}
