package webserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	policyv1ac "k8s.io/client-go/applyconfigurations/policy/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

const kindPDB = "PodDisruptionBudget"

// reconcileDisruptionBudget keeps a PodDisruptionBudget for the pods while
// the WebServer has more than one replica, and deletes the one it owns
// otherwise: with a single replica a budget would block every node drain.
// The replicas are spec.replicas, or, when something else sizes the
// Deployment (an autoscaler), the Deployment's.
func (r *Reconciler) reconcileDisruptionBudget(ctx context.Context, s *scope) (ctrl.Result, error) {
	if replicas(s) > 1 {
		return ctrl.Result{}, reconcileChild(ctx, r, s, kindPDB, &policyv1.PodDisruptionBudget{}, &policyv1.PodDisruptionBudget{},
			new(*policyv1.PodDisruptionBudget), desiredDisruptionBudget, nil)
	}
	return ctrl.Result{}, deleteOwned(ctx, r, s, kindPDB, &policyv1.PodDisruptionBudget{}, ReasonDisruptionBudgetDeleted,
		"the WebServer has at most one replica")
}

// deleteOwned deletes the child of kind named like the WebServer if the
// WebServer controls it, saying why in an Event; anything else of that name
// is left alone.
func deleteOwned[T client.Object](ctx context.Context, r *Reconciler, s *scope, kind string, live T, reason, why string) error {
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(s.ws), live); err != nil || !metav1.IsControlledBy(live, s.ws) {
		return client.IgnoreNotFound(err)
	}
	uid, rv := live.GetUID(), live.GetResourceVersion()
	err := r.Client.Delete(ctx, live, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return r.applyFailed(s, kind, err)
	}
	appliesTotal.WithLabelValues(kind, "deleted").Inc()
	r.Recorder.Eventf(s.ws, live, corev1.EventTypeNormal, reason, "Delete", "Deleted %s %s: %s", kind, live.GetName(), why)
	return nil
}

// replicas is the WebServer's number of pods: spec.replicas, else the
// Deployment's, else 1.
func replicas(s *scope) int32 {
	switch {
	case s.ws.Spec.Replicas != nil:
		return *s.ws.Spec.Replicas
	case s.observed.deployment != nil && s.observed.deployment.Spec.Replicas != nil:
		return *s.observed.deployment.Spec.Replicas
	}
	return 1
}

// desiredDisruptionBudget is the PodDisruptionBudget configuration Deckhand
// applies: the Deployment's selector and spec.disruptionBudget's
// maxUnavailable (1 by default).
func desiredDisruptionBudget(ws *deckhandv1alpha1.WebServer) (*policyv1ac.PodDisruptionBudgetApplyConfiguration, error) {
	maxUnavailable := intstr.FromInt32(1)
	if b := ws.Spec.DisruptionBudget; b != nil && b.MaxUnavailable != nil {
		maxUnavailable = *b.MaxUnavailable
	}
	pdb := policyv1ac.PodDisruptionBudget(ws.Name, ws.Namespace).
		WithLabels(objectLabels(ws.Name)).
		WithOwnerReferences(ownerReference(ws)).
		WithSpec(policyv1ac.PodDisruptionBudgetSpec().
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(ws.Name))).
			WithMaxUnavailable(maxUnavailable))
	h, err := hashOf(pdb)
	if err != nil {
		return nil, fmt.Errorf("hashing the %s: %w", kindPDB, err)
	}
	pdb.WithAnnotations(map[string]string{deckhandv1alpha1.WebServerAppliedHashAnnotation: h})
	return pdb, nil
}
