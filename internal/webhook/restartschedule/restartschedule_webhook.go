// Package restartschedule validates RestartSchedules at admission: cron
// syntax and schedules that never fire (with the cron parser's message),
// schedules that fire more often than the manager allows (a schedule is
// required unless triggers are set), IANA time zones, the target,
// maintenance windows and blackout dates, triggers and their action, and
// positive durations and limits. Defaults
// come from the CRD schema, so there is no mutating webhook.
package restartschedule

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/cronschedule"
	"github.com/deckhand-dev/deckhand/internal/webhook/webhookutil"
)

// failurePolicy=fail: cron syntax, "never fires" and time zones can only be
// checked here (not in CEL), and an object that slipped through would only
// be reported later as InvalidSchedule. The webhook is served by every
// manager replica, and when no replica runs, no schedule runs either, so
// refusing writes meanwhile costs little.
//
// +kubebuilder:webhook:path=/validate-apps-deckhand-dev-v1alpha1-restartschedule,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps.deckhand.dev,resources=restartschedules,verbs=create;update,versions=v1alpha1,name=vrestartschedule.apps.deckhand.dev,admissionReviewVersions=v1

// SetupWebhookWithManager registers the RestartSchedule validating webhook
// with the default settings.
func SetupWebhookWithManager(mgr ctrl.Manager) error {
	return SetupWebhook(mgr, &Validator{})
}

// SetupWebhook registers the RestartSchedule validating webhook served by v.
func SetupWebhook(mgr ctrl.Manager, v *Validator) error {
	return ctrl.NewWebhookManagedBy(mgr, &deckhandv1alpha1.RestartSchedule{}).
		WithValidator(v).
		Complete()
}

// Validator validates RestartSchedules.
type Validator struct {
	// Now tells the time for the "never fires" check; nil means time.Now.
	Now func() time.Time
	// MinInterval is the shortest time allowed between two runs of a
	// schedule (the manager's --restart-schedule-min-interval); zero means
	// cronschedule.DefaultMinInterval.
	MinInterval time.Duration
}

var _ admission.Validator[*deckhandv1alpha1.RestartSchedule] = &Validator{}

var groupKind = deckhandv1alpha1.GroupVersion.WithKind("RestartSchedule").GroupKind()

// ValidateCreate validates a new RestartSchedule.
func (v *Validator) ValidateCreate(_ context.Context, rs *deckhandv1alpha1.RestartSchedule) (admission.Warnings, error) {
	return nil, webhookutil.Invalid(groupKind, rs.Name, v.validate(nil, rs))
}

// ValidateUpdate validates a changed RestartSchedule.
func (v *Validator) ValidateUpdate(_ context.Context, old, rs *deckhandv1alpha1.RestartSchedule) (admission.Warnings, error) {
	return nil, webhookutil.Invalid(groupKind, rs.Name, v.validate(old, rs))
}

// ValidateDelete allows every deletion.
func (v *Validator) ValidateDelete(context.Context, *deckhandv1alpha1.RestartSchedule) (admission.Warnings, error) {
	return nil, nil
}

func (v *Validator) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Validator) minInterval() time.Duration {
	if v.MinInterval > 0 {
		return v.MinInterval
	}
	return cronschedule.DefaultMinInterval
}

// validate checks rs; old is nil on create. A schedule or time zone that
// is unchanged by an update is not re-checked, so that an object accepted
// earlier can always be edited otherwise (or deleted by its owner).
func (v *Validator) validate(old, rs *deckhandv1alpha1.RestartSchedule) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	s := rs.Spec

	switch {
	case s.Schedule == "" && len(s.Triggers) == 0:
		errs = append(errs, field.Required(spec.Child("schedule"), "a schedule is required unless triggers are set"))
	case s.Schedule == "":
		// Restarts on need only.
	case old == nil || old.Spec.Schedule != s.Schedule:
		sched, err := cronschedule.ParseSchedule(s.Schedule, v.now())
		if err == nil {
			err = cronschedule.CheckInterval(sched, v.minInterval())
		}
		if err != nil {
			errs = append(errs, field.Invalid(spec.Child("schedule"), s.Schedule, err.Error()))
		}
	}
	if old == nil || old.Spec.TimeZone != s.TimeZone {
		if _, err := cronschedule.LoadLocation(s.TimeZone); err != nil {
			errs = append(errs, field.Invalid(spec.Child("timeZone"), s.TimeZone, err.Error()))
		}
	}

	target := spec.Child("target")
	switch t := s.Target; {
	case t.TargetRef != nil && t.Selector != nil:
		errs = append(errs, field.Invalid(target, "targetRef and selector", "exactly one of targetRef or selector must be set"))
	case t.TargetRef == nil && t.Selector == nil:
		errs = append(errs, field.Required(target, "exactly one of targetRef or selector must be set"))
	case t.TargetRef != nil:
		ref := target.Child("targetRef")
		switch t.TargetRef.Kind {
		case "Deployment", "StatefulSet", "DaemonSet", "PodSet":
		default:
			errs = append(errs, field.NotSupported(ref.Child("kind"), t.TargetRef.Kind, []string{"Deployment", "StatefulSet", "DaemonSet", "PodSet"}))
		}
		if t.TargetRef.Name == "" {
			errs = append(errs, field.Required(ref.Child("name"), "the workload's name"))
		}
	default:
		if _, err := metav1.LabelSelectorAsSelector(t.Selector); err != nil {
			errs = append(errs, field.Invalid(target.Child("selector"), t.Selector, err.Error()))
		}
	}

	if d := s.StartingDeadlineSeconds; d != nil && (*d < 1 || *d > maxStartingDeadlineSeconds) {
		errs = append(errs, field.Invalid(spec.Child("startingDeadlineSeconds"), *d, fmt.Sprintf("must be between 1 and %d seconds", maxStartingDeadlineSeconds)))
	}
	if s.MaxConcurrent < 1 || s.MaxConcurrent > maxMaxConcurrent {
		errs = append(errs, field.Invalid(spec.Child("maxConcurrent"), s.MaxConcurrent, fmt.Sprintf("must be between 1 and %d", maxMaxConcurrent)))
	}
	if s.RolloutTimeout != nil && (s.RolloutTimeout.Duration <= 0 || s.RolloutTimeout.Duration > maxRolloutTimeout) {
		errs = append(errs, field.Invalid(spec.Child("rolloutTimeout"), s.RolloutTimeout.Duration.String(), "must be a positive duration of at most 168h"))
	}
	if s.HistoryLimit < 1 || s.HistoryLimit > 100 {
		errs = append(errs, field.Invalid(spec.Child("historyLimit"), s.HistoryLimit, fmt.Sprintf("must be between 1 and %d", 100)))
	}
	if p := s.ConcurrencyPolicy; p != deckhandv1alpha1.RestartForbid && p != deckhandv1alpha1.RestartReplace {
		errs = append(errs, field.NotSupported(spec.Child("concurrencyPolicy"), p, []string{string(deckhandv1alpha1.RestartForbid), string(deckhandv1alpha1.RestartReplace)}))
	}
	errs = append(errs, validateCalendar(spec, s)...)
	errs = append(errs, validateTriggers(spec, s)...)
	errs = append(errs, validateUrgency(spec, s)...)
	// An empty policy is the default (the CRD schema fills it in).
	if p := s.FailurePolicy; p != "" && p != deckhandv1alpha1.RestartFailureContinue && p != deckhandv1alpha1.RestartFailureStop {
		errs = append(errs, field.NotSupported(spec.Child("failurePolicy"), p, []string{string(deckhandv1alpha1.RestartFailureContinue), string(deckhandv1alpha1.RestartFailureStop)}))
	}
	if j := s.Jitter; j != nil && (j.Duration < 0 || j.Duration > maxJitter) {
		errs = append(errs, field.Invalid(spec.Child("jitter"), j.Duration.String(), "must be between 0s and 24h"))
	}
	return errs
}

// Bounds of the spec's numbers, as the CRD schema states them (the schema
// refuses first; these keep the webhook's answer the same without it).
const (
	// maxJitter bounds spec.jitter: a restart delayed by more than a day
	// would be indistinguishable from the next day's run.
	maxJitter = 24 * time.Hour
	// maxStartingDeadlineSeconds is a year: a longer deadline is no
	// deadline, and seconds past it would overflow a time.Duration.
	maxStartingDeadlineSeconds = 365 * 24 * 60 * 60
	// maxMaxConcurrent bounds status.active, which lists every workload
	// rolling out.
	maxMaxConcurrent = 100
	// maxRolloutTimeout is a week.
	maxRolloutTimeout = 7 * 24 * time.Hour
	// maxTriggers bounds spec.triggers.
	maxTriggers = 8
	// maxPodAge bounds a podAge trigger's maxAge: a year.
	maxPodAge = 365 * 24 * time.Hour
	// maxSustained bounds a memory or query trigger's for: a day.
	maxSustained = 24 * time.Hour
	// maxQueryExpr and maxQueryURL bound a query trigger's expr and url.
	maxQueryExpr = 4096
	maxQueryURL  = 2048
	// maxActionDuration bounds spec.action.minPodAge and cooldown: a week.
	maxActionDuration = 7 * 24 * time.Hour
	// maxPodsUnavailable bounds spec.action.maxConcurrent.
	maxPodsUnavailable = 100
)

// validateMemory checks a memory trigger.
func validateMemory(p *field.Path, m *deckhandv1alpha1.RestartMemoryTrigger) field.ErrorList {
	var errs field.ErrorList
	if m.Container != "" {
		for _, msg := range validation.IsDNS1123Label(m.Container) {
			errs = append(errs, field.Invalid(p.Child("container"), m.Container, msg))
		}
	}
	switch {
	case (m.PercentOfLimit == nil) == (m.Above == nil):
		errs = append(errs, field.Required(p, "exactly one of percentOfLimit or above must be set"))
	case m.PercentOfLimit != nil && (*m.PercentOfLimit < 1 || *m.PercentOfLimit > 100):
		errs = append(errs, field.Invalid(p.Child("percentOfLimit"), *m.PercentOfLimit, "must be between 1 and 100"))
	case m.Above != nil && m.Above.Sign() <= 0:
		errs = append(errs, field.Invalid(p.Child("above"), m.Above.String(), "must be a positive quantity of bytes"))
	}
	if m.For != nil && (m.For.Duration < 0 || m.For.Duration > maxSustained) {
		errs = append(errs, field.Invalid(p.Child("for"), m.For.Duration.String(), "must be between 0s and 24h"))
	}
	return errs
}

// validateQuery checks a query trigger.
func validateQuery(p *field.Path, q *deckhandv1alpha1.RestartQueryTrigger) field.ErrorList {
	var errs field.ErrorList
	switch ep := p.Child("prometheus", "url"); {
	case q.Prometheus.URL == "":
		errs = append(errs, field.Required(ep, "the base address of a Prometheus HTTP API"))
	case len(q.Prometheus.URL) > maxQueryURL:
		errs = append(errs, field.TooLong(ep, "", maxQueryURL))
	default:
		if u, err := url.Parse(q.Prometheus.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
			errs = append(errs, field.Invalid(ep, q.Prometheus.URL, "must be an http or https URL with a host"))
		}
	}
	if ca := q.Prometheus.CABundle; ca != nil && (ca.Secret == nil) == (ca.ConfigMap == nil) {
		errs = append(errs, field.Required(p.Child("prometheus", "caBundle"), "exactly one of secret or configMap must be set"))
	}
	switch {
	case q.Expr == "":
		errs = append(errs, field.Required(p.Child("expr"), "a PromQL instant query"))
	case len(q.Expr) > maxQueryExpr:
		errs = append(errs, field.TooLong(p.Child("expr"), "", maxQueryExpr))
	}
	if q.For != nil && (q.For.Duration < 0 || q.For.Duration > maxSustained) {
		errs = append(errs, field.Invalid(p.Child("for"), q.For.Duration.String(), "must be between 0s and 24h"))
	}
	// A limit under the threshold would name pods by their prediction
	// that the threshold says are fine.
	if q.Limit != nil && q.Limit.Cmp(q.Above) < 0 {
		errs = append(errs, field.Invalid(p.Child("limit"), q.Limit.String(), fmt.Sprintf("must be at least above (%s)", q.Above.String())))
	}
	return errs
}

// validateUrgency checks spec.urgency: it predicts from memory and query
// triggers only.
func validateUrgency(spec *field.Path, s deckhandv1alpha1.RestartScheduleSpec) field.ErrorList {
	u := s.Urgency
	if u == nil {
		return nil
	}
	var errs field.ErrorList
	if !slices.ContainsFunc(s.Triggers, func(t deckhandv1alpha1.RestartNeedTrigger) bool { return t.Memory != nil || t.Query != nil }) {
		errs = append(errs, field.Invalid(spec.Child("urgency"), "", "urgency needs a memory or query trigger"))
	}
	if d := u.PredictedLimitWithin.Duration; d < time.Second || d > maxActionDuration {
		errs = append(errs, field.Invalid(spec.Child("urgency", "predictedLimitWithin"), d.String(), "must be between 1s and 168h"))
	}
	return errs
}

// validateTriggers checks spec.triggers and spec.action, naming the
// trigger and field at fault.
func validateTriggers(spec *field.Path, s deckhandv1alpha1.RestartScheduleSpec) field.ErrorList {
	var errs field.ErrorList
	tp := spec.Child("triggers")
	if len(s.Triggers) > maxTriggers {
		errs = append(errs, field.TooMany(tp, len(s.Triggers), maxTriggers))
	}
	for i, t := range s.Triggers {
		p := tp.Index(i)
		kinds := 0
		for _, set := range []bool{t.PodAge != nil, t.Memory != nil, t.Query != nil} {
			if set {
				kinds++
			}
		}
		switch {
		case kinds != 1:
			errs = append(errs, field.Required(p, "exactly one kind of trigger (podAge, memory, query) must be set"))
		case t.Query != nil:
			errs = append(errs, validateQuery(p.Child("query"), t.Query)...)
		case t.PodAge != nil:
			if d := t.PodAge.MaxAge.Duration; d < time.Second || d > maxPodAge {
				errs = append(errs, field.Invalid(p.Child("podAge", "maxAge"), d.String(), "must be between 1s and 8760h"))
			}
		default:
			errs = append(errs, validateMemory(p.Child("memory"), t.Memory)...)
		}
	}
	ap := spec.Child("action")
	a := s.Action
	// Empty values are the defaults (the CRD schema fills them in).
	if a.Scope != "" && a.Scope != deckhandv1alpha1.RestartScopePod && a.Scope != deckhandv1alpha1.RestartScopeWorkload {
		errs = append(errs, field.NotSupported(ap.Child("scope"), a.Scope, []string{string(deckhandv1alpha1.RestartScopePod), string(deckhandv1alpha1.RestartScopeWorkload)}))
	}
	if a.MaxConcurrent < 0 || a.MaxConcurrent > maxPodsUnavailable {
		errs = append(errs, field.Invalid(ap.Child("maxConcurrent"), a.MaxConcurrent, fmt.Sprintf("must be between 1 and %d", maxPodsUnavailable)))
	}
	for _, d := range []struct {
		name string
		d    *metav1.Duration
	}{{"minPodAge", a.MinPodAge}, {"cooldown", a.Cooldown}} {
		if d.d != nil && (d.d.Duration < 0 || d.d.Duration > maxActionDuration) {
			errs = append(errs, field.Invalid(ap.Child(d.name), d.d.Duration.String(), "must be between 0s and 168h"))
		}
	}
	return errs
}

// validateCalendar checks spec.windows, spec.blackoutDates and
// spec.outsideWindowPolicy, naming the element and part at fault.
func validateCalendar(spec *field.Path, s deckhandv1alpha1.RestartScheduleSpec) field.ErrorList {
	var errs field.ErrorList
	for i, w := range s.Windows {
		days := make([]string, 0, len(w.Days))
		for _, d := range w.Days {
			days = append(days, string(d))
		}
		if ferr := cronschedule.CheckWindow(cronschedule.WindowSpec{Days: days, Start: w.Start, End: w.End}); ferr != nil {
			errs = append(errs, field.Invalid(spec.Child("windows").Index(i).Child(ferr.Field), ferr.Value, ferr.Message))
		}
	}
	for i, b := range s.BlackoutDates {
		if _, _, err := cronschedule.ParseDateRange(b); err != nil {
			errs = append(errs, field.Invalid(spec.Child("blackoutDates").Index(i), b, err.Error()))
		}
	}
	if p := s.OutsideWindowPolicy; p != "" && p != deckhandv1alpha1.RestartOutsideWindowSkip && p != deckhandv1alpha1.RestartOutsideWindowDefer {
		errs = append(errs, field.NotSupported(spec.Child("outsideWindowPolicy"), p,
			[]string{string(deckhandv1alpha1.RestartOutsideWindowSkip), string(deckhandv1alpha1.RestartOutsideWindowDefer)}))
	}
	return errs
}
