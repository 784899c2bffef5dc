package v1alpha1

// Annotations and labels shared by more than one kind. Every key Deckhand
// writes lives under apps.deckhand.dev so that users can tell at a glance
// which metadata Deckhand owns.
const (
	// LabelManagedBy is the well-known label Deckhand sets on objects it creates.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy on Deckhand's objects.
	ManagedByValue = "deckhand"
	// FieldManager is the field manager Deckhand uses for server-side apply
	// and for its patches, so `kubectl get --show-managed-fields` tells which
	// fields Deckhand owns.
	FieldManager = "deckhand"
)
