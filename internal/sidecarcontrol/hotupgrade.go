package sidecarcontrol

import (
	"encoding/json"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// The environment variables every container of a HotUpgrade sidecar gets,
// read from the pod's version annotations when the container starts.
const (
	// VersionEnv is the container's own version.
	VersionEnv = "SIDECARSET_VERSION"
	// VersionAltEnv is the version of the other container of the same
	// sidecar while a hot upgrade is under way, "0" otherwise.
	VersionAltEnv = "SIDECARSET_VERSION_ALT"
)

// IsHotUpgrade reports whether sc is a HotUpgrade sidecar.
func IsHotUpgrade(sc *deckhandv1alpha1.SidecarContainer) bool {
	return sc.UpgradeStrategy != nil && sc.UpgradeStrategy.UpgradeType == deckhandv1alpha1.HotUpgrade
}

// HotUpgradeSlots returns the names of the two containers a HotUpgrade
// sidecar called name is injected as.
func HotUpgradeSlots(name string) (first, second string) {
	return name + "-1", name + "-2"
}

// HasHotUpgrade reports whether spec has a HotUpgrade sidecar.
func HasHotUpgrade(spec *deckhandv1alpha1.SidecarSetSpec) bool {
	for i := range spec.Containers {
		if IsHotUpgrade(&spec.Containers[i]) {
			return true
		}
	}
	return false
}

// InjectedContainers returns the containers spec injects: its containers,
// with each HotUpgrade sidecar expanded into its two slots, <name>-1 with
// the sidecar's image (working) and <name>-2 with the empty image (idle),
// both reading their versions from the pod's annotations. It returns
// spec.Containers itself when no sidecar is HotUpgrade.
func InjectedContainers(spec *deckhandv1alpha1.SidecarSetSpec) []deckhandv1alpha1.SidecarContainer {
	if !HasHotUpgrade(spec) {
		return spec.Containers
	}
	out := make([]deckhandv1alpha1.SidecarContainer, 0, len(spec.Containers)+1)
	for i := range spec.Containers {
		sc := &spec.Containers[i]
		if !IsHotUpgrade(sc) {
			out = append(out, *sc)
			continue
		}
		first, second := HotUpgradeSlots(sc.Name)
		out = append(out, hotSlot(sc, first, sc.Image), hotSlot(sc, second, sc.UpgradeStrategy.HotUpgradeEmptyImage))
	}
	return out
}

// hotSlot is one of the two containers of the HotUpgrade sidecar sc.
func hotSlot(sc *deckhandv1alpha1.SidecarContainer, name, image string) deckhandv1alpha1.SidecarContainer {
	slot := *sc.DeepCopy()
	slot.Name, slot.Image = name, image
	slot.Env = append(slot.Env,
		annotationEnv(VersionEnv, deckhandv1alpha1.SidecarSetVersionAnnotationPrefix+name),
		annotationEnv(VersionAltEnv, deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix+name))
	return slot
}

func annotationEnv(name, key string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.annotations['" + key + "']"},
	}}
}

// HotSidecar is what injection writes on a pod for one HotUpgrade
// sidecar of a SidecarSet at one generation.
type HotSidecar struct {
	// Name is the sidecar's name; First and Second its two containers.
	Name, First, Second string
	// Versions are the version annotations (key, value) injection sets:
	// the first container works at the generation, the second idles.
	Versions [4][2]string
}

// HotSidecars returns the HotUpgrade sidecars of spec, in spec order, as
// injected at generation gen.
func HotSidecars(spec *deckhandv1alpha1.SidecarSetSpec, gen int64) []HotSidecar {
	var out []HotSidecar
	for i := range spec.Containers {
		sc := &spec.Containers[i]
		if !IsHotUpgrade(sc) {
			continue
		}
		first, second := HotUpgradeSlots(sc.Name)
		out = append(out, HotSidecar{Name: sc.Name, First: first, Second: second, Versions: [4][2]string{
			{deckhandv1alpha1.SidecarSetVersionAnnotationPrefix + first, strconv.FormatInt(gen, 10)},
			{deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix + first, "0"},
			{deckhandv1alpha1.SidecarSetVersionAnnotationPrefix + second, "0"},
			{deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix + second, "0"},
		}})
	}
	return out
}

// WorkingContainers reads the pod's working-slot annotation: sidecar name
// to the container working for it. Malformed reads as empty.
func WorkingContainers(annotations map[string]string) map[string]string {
	m := map[string]string{}
	if raw := annotations[deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation]; raw != "" {
		if json.Unmarshal([]byte(raw), &m) != nil {
			return map[string]string{}
		}
	}
	return m
}

// RenderWorkingContainers encodes the working-slot annotation
// (deterministically: encoding/json sorts map keys).
func RenderWorkingContainers(m map[string]string) string {
	b, err := json.Marshal(m)
	if err != nil {
		// A map of strings always encodes.
		panic(err)
	}
	return string(b)
}

// HotUpgradeSlotsOf returns the working and the idle container of the
// HotUpgrade sidecar called name in a pod with these annotations. A pod
// that records nothing for it works in the first slot, as injected.
func HotUpgradeSlotsOf(name string, working map[string]string) (work, idle string) {
	first, second := HotUpgradeSlots(name)
	if working[name] == second {
		return second, first
	}
	return first, second
}
