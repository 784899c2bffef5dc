// Package podset implements the PodSet validating admission webhook.
package podset

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/webhook/webhookutil"
)

// Failure policy: Fail. The webhook only intercepts create/update of
// podsets (not the status subresource, and the scale subresource has its
// own webhook, bounds.go), so while the manager is down the controller's
// status writes keep working; what is refused is a new or changed spec the
// API server cannot judge without us (the pod template dry run, the
// selector/template checks that CEL cannot express). Accepting those
// unchecked would let a broken template reach the controller, where it
// would surface only as FailedCreate events.
//
// +kubebuilder:webhook:path=/validate-apps-deckhand-dev-v1alpha1-podset,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps.deckhand.dev,resources=podsets,verbs=create;update,versions=v1alpha1,name=vpodset-v1alpha1.apps.deckhand.dev,admissionReviewVersions=v1,timeoutSeconds=10

// SetupWebhookWithManager registers the PodSet webhooks with the default
// replica ceiling. Defaults live in the CRD schema (they apply even when the
// webhook is unreachable), except the selector and template of a PodSet
// written without them, which derive from its name (Defaulter).
func SetupWebhookWithManager(mgr ctrl.Manager) error {
	return SetupWebhook(mgr, &Validator{})
}

// SetupWebhook registers the PodSet validating webhooks served by v: the
// PodSet's and its scale subresource's. v.Client defaults to the manager's.
func SetupWebhook(mgr ctrl.Manager, v *Validator) error {
	if v.Client == nil {
		v.Client = mgr.GetClient()
	}
	if v.DryRunNamespace == "" {
		v.DryRunNamespace = DefaultDryRunNamespace()
	}
	mgr.GetWebhookServer().Register(scalePath, &webhook.Admission{Handler: scaleValidator{max: v.maxReplicas()}})
	return ctrl.NewWebhookManagedBy(mgr, &deckhandv1alpha1.PodSet{}).
		WithDefaulter(Defaulter{}).
		WithValidator(webhookutil.CreateOrUpdate[*deckhandv1alpha1.PodSet](v.Validate)).
		Complete()
}

// Validator validates PodSets. Client is used for the server-side dry run of
// a pod built from the template, in DryRunNamespace (see dryRunTemplate).
type Validator struct {
	Client          client.Client
	DryRunNamespace string
	// MaxReplicas is the most pods a PodSet may ask for (the manager's
	// --max-podset-replicas); zero means DefaultMaxReplicas.
	MaxReplicas int32
}

var gk = deckhandv1alpha1.GroupVersion.WithKind("PodSet").GroupKind()

// Validate judges a new (old is nil) or changed PodSet.
func (v *Validator) Validate(ctx context.Context, old, ps *deckhandv1alpha1.PodSet) (admission.Warnings, error) {
	errs := validate(old, ps)
	errs = append(errs, v.validateBounds(old, ps)...)
	var warnings admission.Warnings
	// The API server judges the template; only when it is new or changed
	// (a scale or label edit does not pay for a dry run).
	if v.Client != nil && (old == nil || !apiequality.Semantic.DeepEqual(old.Spec.Template, ps.Spec.Template)) {
		dryErrs, w := v.dryRunTemplate(ctx, ps)
		errs = append(errs, dryErrs...)
		warnings = append(warnings, w...)
	}
	return warnings, webhookutil.Invalid(gk, ps.Name, errs)
}

// validate checks what does not need the API server. old is nil on create.
func validate(old, ps *deckhandv1alpha1.PodSet) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	if ps.Spec.Replicas != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*ps.Spec.Replicas), spec.Child("replicas"))...)
	}
	errs = append(errs, apivalidation.ValidateNonnegativeField(int64(ps.Spec.MinReadySeconds), spec.Child("minReadySeconds"))...)
	if d := ps.Spec.ProgressDeadlineSeconds; d != nil {
		p := spec.Child("progressDeadlineSeconds")
		switch {
		case *d <= 0:
			errs = append(errs, field.Invalid(p, *d, "must be greater than 0"))
		case *d <= ps.Spec.MinReadySeconds:
			errs = append(errs, field.Invalid(p, *d, "must be greater than minReadySeconds"))
		}
	}
	if l := ps.Spec.RevisionHistoryLimit; l != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*l), spec.Child("revisionHistoryLimit"))...)
	}

	if img := ps.Spec.Image; img != "" {
		c := ps.Spec.Template.Spec.Containers
		if len(c) != 1 || c[0].Image != img {
			errs = append(errs, field.Invalid(spec.Child("image"), img,
				"is the image of the default template only; with a template of your own, set the image in spec.template"))
		}
	}
	selPath := spec.Child("selector")
	if ps.Spec.Selector == nil {
		errs = append(errs, field.Required(selPath, "a PodSet needs a selector"))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(ps.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, selPath)...)
		if len(ps.Spec.Selector.MatchLabels)+len(ps.Spec.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(selPath, ps.Spec.Selector, "empty selector is invalid for a PodSet"))
		} else if sel, err := metav1.LabelSelectorAsSelector(ps.Spec.Selector); err == nil &&
			!sel.Matches(labels.Set(ps.Spec.Template.Labels)) {
			errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), ps.Spec.Template.Labels,
				"`selector` does not match template `labels`"))
		}
	}
	if old != nil && old.Spec.Selector != nil {
		errs = append(errs, apivalidation.ValidateImmutableField(ps.Spec.Selector, old.Spec.Selector, selPath)...)
	}

	tmplSpec := spec.Child("template", "spec")
	if rp := ps.Spec.Template.Spec.RestartPolicy; rp != "" && rp != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(tmplSpec.Child("restartPolicy"), rp, []string{string(corev1.RestartPolicyAlways)}))
	}
	if ps.Spec.Template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(tmplSpec.Child("activeDeadlineSeconds"), "activeDeadlineSeconds in a PodSet is not supported"))
	}
	if len(ps.Spec.Template.Spec.Containers) == 0 {
		errs = append(errs, field.Required(tmplSpec.Child("containers"), "a pod needs at least one container"))
	}

	errs = append(errs, validateStrategy(ps.Spec.UpdateStrategy, spec.Child("updateStrategy"))...)
	return errs
}

func validateStrategy(s deckhandv1alpha1.PodSetUpdateStrategy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch s.Type {
	case "", deckhandv1alpha1.RollingUpdatePodSetStrategyType, deckhandv1alpha1.OnDeletePodSetStrategyType:
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), s.Type, []string{
			string(deckhandv1alpha1.RollingUpdatePodSetStrategyType), string(deckhandv1alpha1.OnDeletePodSetStrategyType)}))
	}
	unavailZero := validateIntOrPercent(s.MaxUnavailable, p.Child("maxUnavailable"), true, &errs)
	surgeZero := validateIntOrPercent(s.MaxSurge, p.Child("maxSurge"), false, &errs)
	if unavailZero && surgeZero {
		errs = append(errs, field.Invalid(p.Child("maxUnavailable"), s.MaxUnavailable.String(),
			"may not be 0 when maxSurge is 0"))
	}
	if s.Partition != nil {
		errs = append(errs, apivalidation.ValidateNonnegativeField(int64(*s.Partition), p.Child("partition"))...)
	}
	switch s.PodReplacement {
	case "", deckhandv1alpha1.DeletePodSetPodReplacement, deckhandv1alpha1.EvictPodSetPodReplacement:
	default:
		errs = append(errs, field.NotSupported(p.Child("podReplacement"), s.PodReplacement, []string{
			string(deckhandv1alpha1.DeletePodSetPodReplacement), string(deckhandv1alpha1.EvictPodSetPodReplacement)}))
	}
	errs = append(errs, webhookutil.ValidateRolloutFailurePolicy(s.OnFailure, p.Child("onFailure"))...)
	return errs
}

// validateIntOrPercent checks an int-or-percent field (at least 0, and at
// most 100% when atMost100) and reports whether it is explicitly zero. A nil
// value is the 25% default, not zero.
func validateIntOrPercent(v *intstr.IntOrString, p *field.Path, atMost100 bool, errs *field.ErrorList) bool {
	if v == nil {
		return false
	}
	bad := webhookutil.ValidateIntOrPercent(v, p, 0, atMost100)
	*errs = append(*errs, bad...)
	n, _ := intstr.GetScaledValueFromIntOrPercent(v, 100, false)
	return len(bad) == 0 && n == 0
}
