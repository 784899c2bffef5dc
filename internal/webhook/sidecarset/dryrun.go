package sidecarset

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/webhook/webhookutil"
)

// PodDryRunner validates a SidecarSet's containers, volumes and pull
// secrets with the API server's own pod validation: it dry-runs the create
// of a synthetic pod that carries them (nothing is stored) and maps the
// errors back to the SidecarSet's fields. This is full container
// validation without importing k8s.io/kubernetes.
type PodDryRunner struct {
	// Client talks to the API server directly (not through the cache).
	Client client.Client
	// Namespace is where the synthetic pod is dry-run; it must exist.
	Namespace string
}

const placeholderName = "deckhand-sidecarset-placeholder"

// Validate dry-runs s's synthetic pod. Invalid fields come back as errors
// with spec.* paths; any other failure (a quota, a policy of the dry-run
// namespace, the API server unreachable) comes back as a warning, because it
// says nothing certain about s.
func (d *PodDryRunner) Validate(ctx context.Context, s *deckhandv1alpha1.SidecarSet) (field.ErrorList, string) {
	pod := SyntheticPod(s, d.Namespace)
	err := webhookutil.DryRunCreate(ctx, d.Client, pod)
	if err == nil {
		return nil, ""
	}
	status := webhookutil.InvalidStatus(err)
	if status == nil || status.Details == nil {
		return nil, fmt.Sprintf("the containers could not be checked against the API server's pod validation: %v", err)
	}
	return mapCauses(s, status.Details.Causes), ""
}

// SyntheticPod is the pod whose dry-run create validates s: s's init
// containers, containers, volumes and pull secrets at the same indexes, so
// that error paths map back one to one, plus placeholders (after them) for
// an app container when s has none and for volumes s's containers mount
// but expects the pod to have.
func SyntheticPod(s *deckhandv1alpha1.SidecarSet, ns string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: "sidecarset-validation-",
			Namespace:    ns,
			Annotations:  map[string]string{deckhandv1alpha1.SidecarSetSkipInjectionAnnotation: "true"},
		},
		Spec: corev1.PodSpec{ImagePullSecrets: s.Spec.ImagePullSecrets},
	}
	for i := range s.Spec.InitContainers {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, *s.Spec.InitContainers[i].Container.DeepCopy())
	}
	for i := range s.Spec.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, *s.Spec.Containers[i].Container.DeepCopy())
	}
	if len(pod.Spec.Containers) == 0 {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: placeholderName, Image: "placeholder"})
	}
	have := map[string]bool{}
	for i := range s.Spec.Volumes {
		pod.Spec.Volumes = append(pod.Spec.Volumes, *s.Spec.Volumes[i].DeepCopy())
		have[s.Spec.Volumes[i].Name] = true
	}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for _, m := range c.VolumeMounts {
				if !have[m.Name] && m.Name != "" {
					have[m.Name] = true
					pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{
						Name: m.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}},
					})
				}
			}
		}
	}
	return pod
}

// mapCauses turns the API server's causes for the synthetic pod into errors
// on s's fields. The synthetic pod keeps s's indexes, so spec.containers[i]
// of the pod is spec.containers[i] of s; causes about the placeholders or
// the pod's metadata are reported against spec.
func mapCauses(s *deckhandv1alpha1.SidecarSet, causes []metav1.StatusCause) field.ErrorList {
	var errs field.ErrorList
	for _, c := range causes {
		path := c.Field
		if !mapsToSidecarSet(s, path) {
			path = "spec"
		}
		errs = append(errs, webhookutil.CauseError(c, path))
	}
	if len(errs) == 0 {
		errs = append(errs, field.Invalid(field.NewPath("spec"), nil, "the API server rejected a pod carrying these sidecars"))
	}
	return errs
}

func mapsToSidecarSet(s *deckhandv1alpha1.SidecarSet, path string) bool {
	for _, l := range []struct {
		prefix string
		n      int
	}{
		{"spec.initContainers[", len(s.Spec.InitContainers)},
		{"spec.containers[", len(s.Spec.Containers)},
		{"spec.volumes[", len(s.Spec.Volumes)},
		{"spec.imagePullSecrets[", len(s.Spec.ImagePullSecrets)},
	} {
		if rest, ok := strings.CutPrefix(path, l.prefix); ok {
			var i int
			if _, err := fmt.Sscanf(rest, "%d]", &i); err == nil && i < l.n {
				return true
			}
			return false
		}
	}
	return false
}
