package testutil

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// Deployment is a Deployment of replicas pods labelled labels (its
// selector too) running containers; tests set the rest on the result.
func Deployment(ns, name string, replicas int32, labels map[string]string, containers ...corev1.Container) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: containers},
			},
		},
	}
}

// PodSet is a PodSet of replicas pods labelled labels (its selector too)
// running containers; tests set the rest on the result. Its spec's
// replicas, selector and template are those of the same Deployment.
func PodSet(ns, name string, replicas int32, labels map[string]string, containers ...corev1.Container) *deckhandv1alpha1.PodSet {
	d := Deployment(ns, name, replicas, labels, containers...)
	return &deckhandv1alpha1.PodSet{
		ObjectMeta: d.ObjectMeta,
		Spec:       deckhandv1alpha1.PodSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
}

// LivePods lists the pods of ns matching labels that are not being deleted.
func LivePods(ctx context.Context, c client.Client, ns string, labels map[string]string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}
