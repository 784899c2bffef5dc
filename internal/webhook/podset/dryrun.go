package podset

import (
	"context"
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/webhook/webhookutil"
)

// DefaultDryRunNamespace is where template pods are dry-run: the manager's
// own namespace, or "default" for a manager that does not know it (run
// outside a cluster).
func DefaultDryRunNamespace() string {
	if ns := podutil.OwnNamespace(); ns != "" {
		return ns
	}
	return metav1.NamespaceDefault
}

// dryRunUnchecked is the one warning a dry run that did not complete gives,
// whatever the reason: its details go to the manager's log only.
const dryRunUnchecked = "spec.template could not be checked by a dry run of a pod from it; the API server judges each pod as it is created"

// dryRunTemplate asks the API server to create (dry run, nothing stored) a
// pod built from the template and maps its field errors under
// spec.template. The API server is the only authority on what a valid pod
// is (feature gates, version skew), so the webhook does not reimplement pod
// validation.
//
// The answer must tell the requester nothing it could not learn with its
// own rights: the webhook port takes reviews from anyone who reaches it,
// with whatever namespace and user they claim, and the dry run runs as
// Deckhand. So the pod is dry-run in v.DryRunNamespace, Deckhand's own
// namespace, never the PodSet's, and only what depends on the template
// alone comes back:
//   - Invalid (422) and BadRequest (400) answers: the API server's field
//     validation of the pod, which runs before any validating admission
//     policy of the namespace (quota, Pod Security, validating webhooks);
//   - Forbidden (403): nothing is reported. A policy of the dry-run
//     namespace refused a pod that had passed field validation (Deckhand's
//     namespace enforces the restricted Pod Security level, which most
//     templates do not meet), or a cluster-wide admission plugin refused it
//     before (an unknown priorityClassName), which the controller's pod
//     creates will meet as well;
//   - anything else (the API server unreachable, a timeout): one fixed
//     warning, the details logged.
//
// The template's service account is not looked up: the ServiceAccount
// admission plugin would refuse, before field validation, a name that
// exists only in the PodSet's namespace, so the pod runs as the dry-run
// namespace's default account and the name's format is checked here.
// What this gives up is what the PodSet's own namespace would say (its
// quota, its Pod Security level, its LimitRange): the controller's pod
// creates meet those, as FailedCreate events on the PodSet.
func (v *Validator) dryRunTemplate(ctx context.Context, ps *deckhandv1alpha1.PodSet) (field.ErrorList, admission.Warnings) {
	t := ps.Spec.Template.DeepCopy()
	tmpl := field.NewPath("spec", "template")
	var errs field.ErrorList
	for _, sa := range []struct{ name, field string }{
		{t.Spec.ServiceAccountName, "serviceAccountName"},
		{t.Spec.DeprecatedServiceAccount, "serviceAccount"},
	} {
		if sa.name == "" {
			continue
		}
		for _, msg := range apivalidation.ValidateServiceAccountName(sa.name, false) {
			errs = append(errs, field.Invalid(tmpl.Child("spec", sa.field), sa.name, msg))
		}
	}
	t.Spec.ServiceAccountName, t.Spec.DeprecatedServiceAccount = "", ""

	name := ps.Name
	if name == "" {
		name = strings.TrimSuffix(ps.GenerateName, "-")
	}
	if name == "" {
		name = "podset"
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: name + "-",
			Namespace:    v.DryRunNamespace,
			Labels:       t.Labels,
			Annotations:  t.Annotations,
		},
		Spec: t.Spec,
	}
	err := webhookutil.DryRunCreate(ctx, v.Client, pod)
	if err == nil {
		return errs, nil
	}
	var status apierrors.APIStatus
	switch {
	case apierrors.IsInvalid(err):
		var causes field.ErrorList
		if d := webhookutil.InvalidStatus(err).Details; d != nil {
			for _, c := range d.Causes {
				causes = append(causes, webhookutil.CauseError(c, tmpl.String()+"."+c.Field))
			}
		}
		if len(causes) == 0 && errors.As(err, &status) {
			causes = append(causes, field.Invalid(tmpl, field.OmitValueType{}, status.Status().Message))
		}
		return append(errs, causes...), nil
	case apierrors.IsBadRequest(err) && errors.As(err, &status):
		return append(errs, field.Invalid(tmpl, field.OmitValueType{}, status.Status().Message)), nil
	case apierrors.IsForbidden(err):
		return errs, nil
	default:
		logf.FromContext(ctx).Info("the dry run of a PodSet's template did not complete", "namespace", v.DryRunNamespace, "error", err.Error())
		return errs, admission.Warnings{dryRunUnchecked}
	}
}
