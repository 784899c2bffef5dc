package sidecarset

import (
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// validateHotUpgrade checks the upgradeStrategy of every sidecar of s
// (mode is the injection mode s is in, as far as it is known).
func validateHotUpgrade(s *deckhandv1alpha1.SidecarSet, mode deckhandv1alpha1.InjectionMode) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for i := range s.Spec.InitContainers {
		us := s.Spec.InitContainers[i].UpgradeStrategy
		p := spec.Child("initContainers").Index(i).Child("upgradeStrategy")
		if us == nil {
			continue
		}
		if us.UpgradeType == deckhandv1alpha1.HotUpgrade {
			errs = append(errs, field.Forbidden(p.Child("upgradeType"), "HotUpgrade is for spec.containers only: an init container is not injected twice"))
		}
		if us.HotUpgradeEmptyImage != "" {
			errs = append(errs, field.Forbidden(p.Child("hotUpgradeEmptyImage"), "only a HotUpgrade container has an empty image"))
		}
	}
	// Every name a container of s takes in a pod, to find a slot name
	// (<name>-1, <name>-2) that another sidecar of s takes already.
	taken := map[string]bool{}
	for i := range s.Spec.InitContainers {
		taken[s.Spec.InitContainers[i].Name] = true
	}
	for i := range s.Spec.Containers {
		if !sidecarcontrol.IsHotUpgrade(&s.Spec.Containers[i]) {
			taken[s.Spec.Containers[i].Name] = true
		}
	}
	for i := range s.Spec.Containers {
		sc := &s.Spec.Containers[i]
		if sc.UpgradeStrategy == nil {
			continue
		}
		p := spec.Child("containers").Index(i).Child("upgradeStrategy")
		switch sc.UpgradeStrategy.UpgradeType {
		case "", deckhandv1alpha1.ColdUpgrade:
			if sc.UpgradeStrategy.HotUpgradeEmptyImage != "" {
				errs = append(errs, field.Forbidden(p.Child("hotUpgradeEmptyImage"), "only a HotUpgrade container has an empty image: set upgradeType to HotUpgrade or remove it"))
			}
			continue
		case deckhandv1alpha1.HotUpgrade:
		default:
			errs = append(errs, field.NotSupported(p.Child("upgradeType"), sc.UpgradeStrategy.UpgradeType,
				[]string{string(deckhandv1alpha1.ColdUpgrade), string(deckhandv1alpha1.HotUpgrade)}))
			continue
		}
		if mode == deckhandv1alpha1.PolicyInjection {
			errs = append(errs, field.Forbidden(p.Child("upgradeType"),
				"spec.injectionMode: Policy does not support spec.containers[].upgradeStrategy.upgradeType HotUpgrade: use injectionMode Webhook for a HotUpgrade sidecar"))
		}
		empty := sc.UpgradeStrategy.HotUpgradeEmptyImage
		switch {
		case strings.TrimSpace(empty) == "":
			errs = append(errs, field.Required(p.Child("hotUpgradeEmptyImage"), "a HotUpgrade sidecar needs an empty image for its idle container"))
		case empty != strings.TrimSpace(empty):
			errs = append(errs, field.Invalid(p.Child("hotUpgradeEmptyImage"), empty, "must not have leading or trailing whitespace"))
		case empty == sc.Image:
			errs = append(errs, field.Invalid(p.Child("hotUpgradeEmptyImage"), empty, "must differ from spec.containers[].image: the idle container is told apart by its image"))
		}
		if sc.Name == "" {
			continue
		}
		first, second := sidecarcontrol.HotUpgradeSlots(sc.Name)
		for _, slot := range []string{first, second} {
			for _, msg := range validation.IsDNS1123Label(slot) {
				errs = append(errs, field.Invalid(spec.Child("containers").Index(i).Child("name"), sc.Name,
					fmt.Sprintf("a HotUpgrade sidecar is injected as %s and %s: %s", first, second, msg)))
			}
			if taken[slot] {
				errs = append(errs, field.Invalid(spec.Child("containers").Index(i).Child("name"), sc.Name,
					fmt.Sprintf("a HotUpgrade sidecar is injected as %s and %s, and another sidecar of this SidecarSet is called %s", first, second, slot)))
			}
			taken[slot] = true
		}
		for j := range sc.Env {
			if n := sc.Env[j].Name; n == sidecarcontrol.VersionEnv || n == sidecarcontrol.VersionAltEnv {
				errs = append(errs, field.Invalid(spec.Child("containers").Index(i).Child("env").Index(j).Child("name"), n,
					"is set by Deckhand in each container of a HotUpgrade sidecar"))
			}
		}
	}
	return errs
}

// validateHotUpgradeUpdate holds the rules for changing an existing
// SidecarSet's sidecars that pods already run as HotUpgrade pairs (or as
// one cold container): a container keeps its upgradeType and its empty
// image, and a HotUpgrade sidecar changes nothing but its image, the only
// change a hot upgrade can carry to running pods.
func validateHotUpgradeUpdate(old, s *deckhandv1alpha1.SidecarSet) field.ErrorList {
	var errs field.ErrorList
	before := map[string]*deckhandv1alpha1.SidecarContainer{}
	for i := range old.Spec.Containers {
		before[old.Spec.Containers[i].Name] = &old.Spec.Containers[i]
	}
	for i := range s.Spec.Containers {
		sc := &s.Spec.Containers[i]
		was, ok := before[sc.Name]
		if !ok {
			continue
		}
		p := field.NewPath("spec", "containers").Index(i)
		oldType, newType := upgradeTypeOf(was), upgradeTypeOf(sc)
		if oldType != newType {
			errs = append(errs, field.Invalid(p.Child("upgradeStrategy", "upgradeType"), newType,
				fmt.Sprintf("cannot change from %s to %s: pods run the container %s; give the sidecar a new name instead",
					oldType, newType, map[bool]string{true: "as two containers", false: "as one container"}[oldType == deckhandv1alpha1.HotUpgrade])))
			continue
		}
		if newType != deckhandv1alpha1.HotUpgrade {
			continue
		}
		if o, n := was.UpgradeStrategy.HotUpgradeEmptyImage, sc.UpgradeStrategy.HotUpgradeEmptyImage; o != n {
			errs = append(errs, field.Invalid(p.Child("upgradeStrategy", "hotUpgradeEmptyImage"), n,
				fmt.Sprintf("cannot change (was %q): the idle containers of running pods are told apart by it", o)))
			continue
		}
		a, b := was.DeepCopy(), sc.DeepCopy()
		a.Image, b.Image = "", ""
		if !apiequality.Semantic.DeepEqual(a, b) {
			errs = append(errs, field.Forbidden(p,
				"a HotUpgrade sidecar can change only its image: running pods take a new image by a hot upgrade, and nothing else; to change more, give the sidecar a new name"))
		}
	}
	return errs
}

func upgradeTypeOf(sc *deckhandv1alpha1.SidecarContainer) deckhandv1alpha1.SidecarContainerUpgradeType {
	if sidecarcontrol.IsHotUpgrade(sc) {
		return deckhandv1alpha1.HotUpgrade
	}
	return deckhandv1alpha1.ColdUpgrade
}

// validateHotUpgradeConflicts extends validateConflicts to the containers a
// HotUpgrade sidecar is injected as: no SidecarSet that can select the same
// pods may inject a container called like one of them (<name>-1, <name>-2),
// nor may a HotUpgrade sidecar's containers take a name the other injects.
// Clashes of plain names are validateConflicts' to report.
func validateHotUpgradeConflicts(s *deckhandv1alpha1.SidecarSet, others []*deckhandv1alpha1.SidecarSet) field.ErrorList {
	var errs field.ErrorList
	mine := injectedNames(s)
	for _, o := range others {
		if o.Name == s.Name || o.DeletionTimestamp != nil || (!sidecarcontrol.HasHotUpgrade(&s.Spec) && !sidecarcontrol.HasHotUpgrade(&o.Spec)) ||
			!sidecarcontrol.CanOverlap(s, o) {
			continue
		}
		theirs := injectedNames(o)
		for _, n := range mine {
			t, ok := find(theirs, n.injected)
			if !ok || (!n.hot && !t.hot) {
				continue
			}
			errs = append(errs, field.Invalid(n.path, n.spec, fmt.Sprintf(
				"SidecarSet %q, whose selector and namespaces can match the same pods, injects a container called %s (HotUpgrade sidecars are injected as <name>-1 and <name>-2)", o.Name, n.injected)))
		}
	}
	return errs
}

// injectedName is one container a SidecarSet injects: its name in the pod,
// the name and path of the sidecar in the spec, and whether it is one of a
// HotUpgrade sidecar's two.
type injectedName struct {
	injected, spec string
	path           *field.Path
	hot            bool
}

func injectedNames(s *deckhandv1alpha1.SidecarSet) []injectedName {
	var out []injectedName
	for i := range s.Spec.InitContainers {
		n := s.Spec.InitContainers[i].Name
		out = append(out, injectedName{injected: n, spec: n, path: field.NewPath("spec", "initContainers").Index(i).Child("name")})
	}
	for i := range s.Spec.Containers {
		sc := &s.Spec.Containers[i]
		p := field.NewPath("spec", "containers").Index(i).Child("name")
		if !sidecarcontrol.IsHotUpgrade(sc) {
			out = append(out, injectedName{injected: sc.Name, spec: sc.Name, path: p})
			continue
		}
		first, second := sidecarcontrol.HotUpgradeSlots(sc.Name)
		out = append(out, injectedName{injected: first, spec: sc.Name, path: p, hot: true}, injectedName{injected: second, spec: sc.Name, path: p, hot: true})
	}
	return out
}

func find(names []injectedName, injected string) (injectedName, bool) {
	for _, n := range names {
		if n.injected == injected {
			return n, true
		}
	}
	return injectedName{}, false
}
