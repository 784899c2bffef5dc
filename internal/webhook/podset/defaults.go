package podset

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// A PodSet written with only replicas (and perhaps an image), as the
// operator tutorials write one, gets a selector and template from the
// defaulting webhook. It fails closed like the validating one: a PodSet the
// webhook did not default would be refused for its missing selector anyway.
//
// +kubebuilder:webhook:path=/mutate-apps-deckhand-dev-v1alpha1-podset,mutating=true,failurePolicy=fail,sideEffects=None,groups=apps.deckhand.dev,resources=podsets,verbs=create;update,versions=v1alpha1,name=mpodset-v1alpha1.apps.deckhand.dev,admissionReviewVersions=v1,timeoutSeconds=5

// DefaultImage is the image of the default template's container when
// spec.image is unset: the pause image, which runs as a non-root user and
// does nothing.
const DefaultImage = "registry.k8s.io/pause:3.10"

// DefaultContainerName is the name of the default template's container.
const DefaultContainerName = "main"

// Defaulter gives a PodSet with neither selector nor template the default
// ones. A PodSet with either is left as written: the validator judges it.
type Defaulter struct{}

// Default fills in the default selector and template.
func (Defaulter) Default(_ context.Context, ps *deckhandv1alpha1.PodSet) error {
	if ps.Spec.Selector != nil || len(ps.Spec.Template.Spec.Containers) > 0 || len(ps.Spec.Template.Labels) > 0 {
		return nil
	}
	labels := map[string]string{"app.kubernetes.io/name": "podset", "app.kubernetes.io/instance": ps.Name}
	image := ps.Spec.Image
	if image == "" {
		image = DefaultImage
	}
	ps.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
	ps.Spec.Template = corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": "podset", "app.kubernetes.io/instance": ps.Name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: DefaultContainerName, Image: image}}},
	}
	return nil
}
