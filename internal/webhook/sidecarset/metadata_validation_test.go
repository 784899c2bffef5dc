package sidecarset

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// TestPatchPodMetadataRatchet: a key the old object already had stays
// accepted when the allowlist no longer allows it (injection drops it), so
// that narrowing the allowlist does not lock a SidecarSet against its
// other changes; a new key outside it is refused.
func TestPatchPodMetadataRatchet(t *testing.T) {
	old := set("a", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"gone.io/k": "x"}}}
	})
	upd := old.DeepCopy()
	upd.Spec.Containers[0].Image = "a:2"
	if errs := validatePatchPodMetadata(old, upd, sidecarcontrol.MetadataAllowlist{}); len(errs) != 0 {
		t.Errorf("an update keeping a formerly allowed key was refused: %v", errs)
	}
	upd.Spec.PatchPodMetadata[0].Annotations["gone.io/new"] = "y"
	errs := validatePatchPodMetadata(old, upd, sidecarcontrol.MetadataAllowlist{})
	if len(errs) != 1 || errs[0].Field != "spec.patchPodMetadata[0].annotations[gone.io/new]" {
		t.Errorf("a new key outside the allowlist: %v", errs)
	}
	if errs := validatePatchPodMetadata(nil, old, sidecarcontrol.MetadataAllowlist{}); len(errs) != 1 {
		t.Errorf("creating with a key outside the allowlist: %v", errs)
	}
}

// set is a SidecarSet called name selecting app=web with one sidecar,
// changed by mut.
func set(name string, mut func(*deckhandv1alpha1.SidecarSet)) *deckhandv1alpha1.SidecarSet {
	s := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []deckhandv1alpha1.SidecarContainer{
				{Container: corev1.Container{Name: name + "-c", Image: name + ":1"}},
			},
		},
	}
	if mut != nil {
		mut(s)
	}
	return s
}
