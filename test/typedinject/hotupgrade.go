package typedinject

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func isHot(sc *deckhandv1alpha1.SidecarContainer) bool {
	return sc.UpgradeStrategy != nil && sc.UpgradeStrategy.UpgradeType == deckhandv1alpha1.HotUpgrade
}

// hotExpanded is s's containers with every HotUpgrade sidecar X replaced
// by X-1 (its image) and X-2 (the empty image), each reading
// SIDECARSET_VERSION and SIDECARSET_VERSION_ALT from its own annotations.
func hotExpanded(s *deckhandv1alpha1.SidecarSet) []deckhandv1alpha1.SidecarContainer {
	var out []deckhandv1alpha1.SidecarContainer
	for i := range s.Spec.Containers {
		sc := s.Spec.Containers[i]
		if !isHot(&sc) {
			out = append(out, sc)
			continue
		}
		for slot, image := range []string{sc.Image, sc.UpgradeStrategy.HotUpgradeEmptyImage} {
			c := *sc.DeepCopy()
			c.Name = fmt.Sprintf("%s-%d", sc.Name, slot+1)
			c.Image = image
			for _, v := range []struct{ env, prefix string }{
				{"SIDECARSET_VERSION", deckhandv1alpha1.SidecarSetVersionAnnotationPrefix},
				{"SIDECARSET_VERSION_ALT", deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix},
			} {
				c.Env = append(c.Env, corev1.EnvVar{Name: v.env, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
					APIVersion: "v1", FieldPath: fmt.Sprintf("metadata.annotations['%s%s']", v.prefix, c.Name)}}})
			}
			out = append(out, c)
		}
	}
	return out
}

// hotAnnotations are the working slots and versions of the HotUpgrade
// sidecars injected.
type hotAnnotations struct {
	working  map[string]string
	versions map[string]string
}

// add records s's HotUpgrade sidecars that the pod did not have: working
// in slot 1 at s's generation, slot 2 idle.
func (h *hotAnnotations) add(s *deckhandv1alpha1.SidecarSet, podHas func(string) bool) {
	for i := range s.Spec.Containers {
		sc := &s.Spec.Containers[i]
		if !isHot(sc) || podHas(sc.Name+"-1") {
			continue
		}
		if h.working == nil {
			h.working, h.versions = map[string]string{}, map[string]string{}
		}
		h.working[sc.Name] = sc.Name + "-1"
		h.versions[deckhandv1alpha1.SidecarSetVersionAnnotationPrefix+sc.Name+"-1"] = fmt.Sprint(s.Generation)
		h.versions[deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix+sc.Name+"-1"] = "0"
		h.versions[deckhandv1alpha1.SidecarSetVersionAnnotationPrefix+sc.Name+"-2"] = "0"
		h.versions[deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix+sc.Name+"-2"] = "0"
	}
}

func (h *hotAnnotations) apply(pod *corev1.Pod) {
	if h.working == nil {
		return
	}
	working := map[string]string{}
	if raw := pod.Annotations[deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation]; raw != "" {
		if json.Unmarshal([]byte(raw), &working) != nil {
			working = map[string]string{}
		}
	}
	for k, v := range h.working {
		working[k] = v
	}
	b, _ := json.Marshal(working)
	pod.Annotations[deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation] = string(b)
	for k, v := range h.versions {
		pod.Annotations[k] = v
	}
}
