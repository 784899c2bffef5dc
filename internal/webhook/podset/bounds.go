package podset

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// DefaultMaxReplicas is the replica ceiling of a PodSet unless the manager
// is told otherwise (--max-podset-replicas). Every pod of a PodSet is
// created, watched and held in memory by the manager, so a tenant's
// replicas are the manager's memory and API writes.
const DefaultMaxReplicas int32 = 10000

func (v *Validator) maxReplicas() int32 {
	if v.MaxReplicas > 0 {
		return v.MaxReplicas
	}
	return DefaultMaxReplicas
}

// validateBounds checks the sizes a tenant chooses: the name, which becomes
// the value of the apps.deckhand.dev/podset label on the PodSet's
// ControllerRevisions (a label value: at most 63 characters), and
// spec.replicas against the ceiling. The name is judged on create only (it
// cannot change); replicas only when they grow, so that a PodSet above a
// ceiling lowered since can still be edited and scaled down.
func (v *Validator) validateBounds(old, ps *deckhandv1alpha1.PodSet) field.ErrorList {
	var errs field.ErrorList
	if old == nil {
		for _, msg := range validation.IsValidLabelValue(ps.Name) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), ps.Name,
				"must be usable as the value of the "+deckhandv1alpha1.PodSetNameLabel+" label: "+msg))
		}
	}
	if ps.Spec.Replicas != nil {
		var before int32
		if old != nil && old.Spec.Replicas != nil {
			before = *old.Spec.Replicas
		}
		errs = append(errs, replicaCeiling(field.NewPath("spec", "replicas"), *ps.Spec.Replicas, before, old == nil, v.maxReplicas())...)
	}
	return errs
}

// replicaCeiling refuses replicas above max, unless they are not growing
// (from before) on an update.
func replicaCeiling(p *field.Path, replicas, before int32, create bool, max int32) field.ErrorList {
	if replicas <= max || (!create && replicas <= before) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, replicas, fmt.Sprintf("must be at most %d (the manager's --max-podset-replicas)", max))}
}

// scalePath serves the PodSet scale subresource's webhook.
const scalePath = "/validate-apps-deckhand-dev-v1alpha1-podset-scale"

// Failure policy: Fail. A scale refused while the manager is down costs
// nothing: the PodSet controller, in the same process, is down too, and no
// pod would be created before it is back. Accepting it unchecked would
// let `kubectl scale` pass the ceiling.
//
// +kubebuilder:webhook:path=/validate-apps-deckhand-dev-v1alpha1-podset-scale,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps.deckhand.dev,resources=podsets/scale,verbs=update,versions=v1alpha1,name=vpodset-scale-v1alpha1.apps.deckhand.dev,admissionReviewVersions=v1,timeoutSeconds=5

// scaleValidator holds a PodSet's /scale subresource to the replica
// ceiling: `kubectl scale` and the HorizontalPodAutoscaler write there, and
// the PodSet's own webhook does not see those writes.
type scaleValidator struct {
	max int32
}

func (h scaleValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var scale, old autoscalingv1.Scale
	if err := json.Unmarshal(req.Object.Raw, &scale); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if len(req.OldObject.Raw) > 0 {
		if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	errs := replicaCeiling(field.NewPath("spec", "replicas"), scale.Spec.Replicas, old.Spec.Replicas, false, h.max)
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	status := apierrors.NewInvalid(autoscalingv1.SchemeGroupVersion.WithKind("Scale").GroupKind(), req.Name, errs).ErrStatus
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}
