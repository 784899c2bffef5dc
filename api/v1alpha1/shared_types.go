package v1alpha1

// Annotations and labels shared by more than one kind. Every key Deckhand
// writes lives under apps.deckhand.dev so that users can tell at a glance
// which metadata Deckhand owns.
const (
	// ManagedByLabel is the well-known label Deckhand sets on objects it creates.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of ManagedByLabel on Deckhand's objects.
	ManagedByValue = "deckhand"
	// FieldManager is the field manager Deckhand uses for server-side apply
	// and for its patches, so `kubectl get --show-managed-fields` tells which
	// fields Deckhand owns.
	FieldManager = "deckhand"
)

// Condition types every kind sets, so that kubectl wait, kstatus
// (sigs.k8s.io/cli-utils, used by Flux and kpt) and Argo CD can tell a
// healthy object from one still rolling out or one that needs help without
// knowing the kind.
const (
	// ReadyCondition summarizes the other conditions: True when the object
	// has reached what its spec asks for, False with a reason otherwise. It
	// is always present and carries the generation it describes.
	ReadyCondition = "Ready"
	// ReconcilingCondition is True while Deckhand is still working towards
	// the spec (a rollout or scaling in progress). Following the kstatus
	// conventions it is an abnormal-true condition: present only while True.
	ReconcilingCondition = "Reconciling"
	// StalledCondition is True when progress is blocked until someone acts
	// (a refused pod, a name conflict, pods that must be recreated). Like
	// Reconciling it is present only while True.
	StalledCondition = "Stalled"
)
