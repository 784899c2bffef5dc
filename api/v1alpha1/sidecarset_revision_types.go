package v1alpha1

// Labels of the ControllerRevisions that hold a SidecarSet's revisions.
const (
	// SidecarSetNameLabel on a ControllerRevision names the SidecarSet whose
	// revision it holds, so that a SidecarSet's history can be listed.
	SidecarSetNameLabel = "apps.deckhand.dev/sidecarset"
	// SidecarSetRevisionLabel on a ControllerRevision is the revision it
	// holds: the hash that pods record in the apps.deckhand.dev/sidecarset-hash
	// annotation (status.latestRevision for the latest). It differs from the
	// hash in the ControllerRevision's name only after a name collision.
	SidecarSetRevisionLabel = "apps.deckhand.dev/sidecarset-revision"
	// SidecarSetCustomVersionLabel on a SidecarSet is a version name of the
	// user's choosing; the controller copies it onto the ControllerRevision
	// of the SidecarSet's current revision, where
	// spec.injectionStrategy.revision.customVersion finds it.
	SidecarSetCustomVersionLabel = "apps.deckhand.dev/sidecarset-custom-version"
)

// DefaultSidecarSetRevisionHistoryLimit is the number of ControllerRevisions
// a SidecarSet keeps when spec.revisionHistoryLimit is unset.
const DefaultSidecarSetRevisionHistoryLimit = 10

// SidecarSetInjectRevisionPolicy says which new pods get the pinned revision.
// +kubebuilder:validation:Enum=Always;Partial
type SidecarSetInjectRevisionPolicy string

const (
	// AlwaysInjectRevision: every new pod gets the pinned revision.
	AlwaysInjectRevision SidecarSetInjectRevisionPolicy = "Always"
	// PartialInjectRevision: a new pod gets the pinned revision or the latest
	// as updateStrategy would have it: with updateStrategy.selector, pods it
	// does not select get the pinned revision and those it selects the
	// latest; with updateStrategy.partition, a pod gets the pinned revision
	// while fewer than partition pods carry another revision than the
	// latest (status.matchedPods - status.updatedPods), else the latest;
	// with neither, the latest; while updateStrategy.paused, the pinned one.
	PartialInjectRevision SidecarSetInjectRevisionPolicy = "Partial"
)

// SidecarSetInjectRevision pins the revision injected into new pods to one
// of the SidecarSet's ControllerRevisions.
// +kubebuilder:validation:XValidation:rule="has(self.revisionName) != has(self.customVersion)",message="exactly one of revisionName and customVersion must be set",fieldPath=".revisionName"
type SidecarSetInjectRevision struct {
	// RevisionName is the name of one of the SidecarSet's ControllerRevisions
	// (in the manager's namespace, labelled apps.deckhand.dev/sidecarset=NAME;
	// status.latestRevisionName is the latest). Exactly one of revisionName and customVersion is set.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +optional
	RevisionName *string `json:"revisionName,omitempty"`

	// CustomVersion picks the newest of the SidecarSet's ControllerRevisions
	// labelled apps.deckhand.dev/sidecarset-custom-version with this value
	// (the label the SidecarSet carried when that revision was its latest).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +optional
	CustomVersion *string `json:"customVersion,omitempty"`

	// Policy says which new pods get the pinned revision: Always (the
	// default) every one; Partial those that updateStrategy would keep on
	// the old revision (see PartialInjectRevision). Running pods follow the
	// rolling update as always: its selector and partition decide which of
	// them move to the latest revision. Policy injection mode supports
	// Always only.
	// +kubebuilder:default=Always
	// +optional
	Policy SidecarSetInjectRevisionPolicy `json:"policy,omitempty"`
}
