// Package webhookutil holds what more than one of Deckhand's admission
// webhooks needs: judging pods by a server-side dry run and reading the
// API server's answer as field errors, the name-format and
// integer-or-percentage checks, and
// the validator of a kind judged alike on create and update.
package webhookutil

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// DryRunCreate asks the API server to create obj as a dry run: it is
// admitted and validated as a real create would be, and nothing is stored.
// The API server is the only authority on what a valid pod is (feature
// gates, version skew), so the webhooks judge pods this way instead of
// reimplementing pod validation.
func DryRunCreate(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Create(ctx, obj, client.DryRunAll, client.FieldOwner(deckhandv1alpha1.FieldManager))
}

// InvalidStatus returns the API server's Status when err says the object is
// invalid (HTTP 422), nil for any other error.
func InvalidStatus(err error) *metav1.Status {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return nil
	}
	st := status.Status()
	return &st
}

// CauseError is the field error at path that one cause of an Invalid answer
// reports: the cause's type, and its message without the type's text, which
// the API server writes in front of the detail. A cause whose message does
// not start with its type's text is reported as an invalid value with the
// whole message.
func CauseError(c metav1.StatusCause, path string) *field.Error {
	typ := field.ErrorType(c.Type)
	detail := c.Message
	if rest, ok := strings.CutPrefix(c.Message, typ.String()); ok {
		detail = strings.TrimPrefix(rest, ": ")
	} else {
		typ = field.ErrorTypeInvalid
	}
	return &field.Error{Type: typ, Field: path, BadValue: field.OmitValueType{}, Detail: detail}
}

// Check is one Invalid error at p for each message that check (one of the
// k8s.io/apimachinery/pkg/util/validation Is* functions) returns for value.
func Check(p *field.Path, value string, check func(string) []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range check(value) {
		errs = append(errs, field.Invalid(p, value, msg))
	}
	return errs
}

var percentRE = regexp.MustCompile(`^[0-9]+%$`)

// ValidateIntOrPercent checks an integer-or-percentage field: an integer of
// at least minimum, or a percentage "N%" of at least minimum% and, when
// atMost100, at most 100%.
func ValidateIntOrPercent(v *intstr.IntOrString, p *field.Path, minimum int, atMost100 bool) field.ErrorList {
	if v.Type != intstr.String {
		if int(v.IntVal) < minimum {
			return field.ErrorList{field.Invalid(p, v.IntVal, fmt.Sprintf("must be at least %d", minimum))}
		}
		return nil
	}
	if !percentRE.MatchString(v.StrVal) {
		return field.ErrorList{field.Invalid(p, v.StrVal, `must be an integer or a percentage such as "25%"`)}
	}
	n, _ := intstr.GetScaledValueFromIntOrPercent(v, 100, true)
	switch {
	case atMost100 && (n < minimum || n > 100):
		return field.ErrorList{field.Invalid(p, v.StrVal, fmt.Sprintf("must be between %d%% and 100%%", minimum))}
	case n < minimum:
		return field.ErrorList{field.Invalid(p, v.StrVal, fmt.Sprintf("must be at least %d%%", minimum))}
	}
	return nil
}

// ValidateRolloutFailurePolicy checks updateStrategy.onFailure, the same
// vocabulary for every kind that rolls out: empty (the default), Pause or
// Rollback.
func ValidateRolloutFailurePolicy(v deckhandv1alpha1.RolloutFailurePolicy, p *field.Path) field.ErrorList {
	switch v {
	case "", deckhandv1alpha1.PauseRolloutFailurePolicy, deckhandv1alpha1.RollbackRolloutFailurePolicy:
		return nil
	}
	return field.ErrorList{field.NotSupported(p, v, []string{
		string(deckhandv1alpha1.PauseRolloutFailurePolicy), string(deckhandv1alpha1.RollbackRolloutFailurePolicy)})}
}

// Invalid is errs as the API server's Invalid answer about the object of
// kind gk called name; nil when errs is empty.
func Invalid(gk schema.GroupKind, name string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(gk, name, errs)
}

// CreateOrUpdate is the admission.Validator of a kind whose creates and
// updates one check judges (old is nil on a create) and whose deletions are
// always allowed.
type CreateOrUpdate[T runtime.Object] func(ctx context.Context, old, obj T) (admission.Warnings, error)

var _ admission.Validator[*deckhandv1alpha1.PodSet] = CreateOrUpdate[*deckhandv1alpha1.PodSet](nil)

// ValidateCreate implements admission.Validator.
func (f CreateOrUpdate[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	var none T
	return f(ctx, none, obj)
}

// ValidateUpdate implements admission.Validator.
func (f CreateOrUpdate[T]) ValidateUpdate(ctx context.Context, old, obj T) (admission.Warnings, error) {
	return f(ctx, old, obj)
}

// ValidateDelete implements admission.Validator.
func (f CreateOrUpdate[T]) ValidateDelete(context.Context, T) (admission.Warnings, error) {
	return nil, nil
}
