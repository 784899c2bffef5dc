package sidecarcontrol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/names"
)

// A SidecarSet's revisions are ControllerRevisions in the manager's own
// namespace (a SidecarSet is cluster-scoped; a ControllerRevision is not),
// controlled by the SidecarSet, labelled with its name and the revision
// hash. Their data is RevisionSpec: what the SidecarSet injects at that
// revision, the input of Hashes.

// RevisionSpec is what a SidecarSet's ControllerRevision holds, under
// "spec": the parts of the SidecarSet spec the revision hash covers.
type RevisionSpec struct {
	InitContainers   []deckhandv1alpha1.SidecarContainer `json:"initContainers,omitempty"`
	Containers       []deckhandv1alpha1.SidecarContainer `json:"containers,omitempty"`
	Volumes          []corev1.Volume                     `json:"volumes,omitempty"`
	ImagePullSecrets []corev1.LocalObjectReference       `json:"imagePullSecrets,omitempty"`
}

type revisionData struct {
	Spec RevisionSpec `json:"spec"`
}

// RevisionSpecOf returns the parts of spec a revision holds.
func RevisionSpecOf(spec *deckhandv1alpha1.SidecarSetSpec) RevisionSpec {
	return RevisionSpec{InitContainers: spec.InitContainers, Containers: spec.Containers, Volumes: spec.Volumes, ImagePullSecrets: spec.ImagePullSecrets}
}

// EncodeRevision returns the data of the ControllerRevision of spec.
func EncodeRevision(spec *deckhandv1alpha1.SidecarSetSpec) ([]byte, error) {
	return json.Marshal(revisionData{Spec: RevisionSpecOf(spec)})
}

// DecodeRevision returns what a SidecarSet's ControllerRevision holds.
func DecodeRevision(cr *appsv1.ControllerRevision) (RevisionSpec, error) {
	var d revisionData
	if err := json.Unmarshal(cr.Data.Raw, &d); err != nil {
		return RevisionSpec{}, fmt.Errorf("ControllerRevision %s: %w", cr.Name, err)
	}
	return d.Spec, nil
}

// RevisionNameHash is the hash in the name of the ControllerRevision of
// revision hash after count name collisions: the hash itself without one.
func RevisionNameHash(hash string, count *int32) string {
	if count == nil || *count == 0 {
		return hash
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%d", hash, *count))
	return hex.EncodeToString(sum[:8])
}

// NameLabelValue is the value of the apps.deckhand.dev/sidecarset label for
// the SidecarSet called name: the name, or, for a name longer than a label
// value may be, its start and a hash of the whole. The controller reference
// tells apart the rare SidecarSets whose values are equal.
func NameLabelValue(name string) string {
	return names.Rule{Max: 63, Digits: 16}.Shorten(name, name)
}
