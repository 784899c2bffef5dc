// Package webserver holds the WebServer admission webhook: it checks what the
// CRD schema and its CEL rules cannot express before a WebServer is stored.
package webserver

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/webhook/webhookutil"
)

// The webhook fails closed (failurePolicy=Fail): while Deckhand is down no
// WebServer can be created or changed, but then nothing could act on one
// either, and an invalid spec let through would only surface later as a
// Degraded WebServer whose Deployment cannot be applied.
// +kubebuilder:webhook:path=/validate-apps-deckhand-dev-v1alpha1-webserver,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps.deckhand.dev,resources=webservers,verbs=create;update,versions=v1alpha1,name=vwebserver-v1alpha1.apps.deckhand.dev,admissionReviewVersions=v1

// SetupWebhookWithManager registers the WebServer validating webhook.
func SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &deckhandv1alpha1.WebServer{}).
		WithValidator(&Validator{}).
		Complete()
}

// Validator validates WebServers.
type Validator struct{}

var _ admission.Validator[*deckhandv1alpha1.WebServer] = &Validator{}

var groupKind = deckhandv1alpha1.GroupVersion.WithKind("WebServer").GroupKind()

// ValidateCreate validates a new WebServer.
func (v *Validator) ValidateCreate(_ context.Context, ws *deckhandv1alpha1.WebServer) (admission.Warnings, error) {
	return nil, webhookutil.Invalid(groupKind, ws.Name, validate(nil, ws))
}

// ValidateUpdate validates a changed WebServer.
func (v *Validator) ValidateUpdate(_ context.Context, old, ws *deckhandv1alpha1.WebServer) (admission.Warnings, error) {
	return nil, webhookutil.Invalid(groupKind, ws.Name, validate(old, ws))
}

// ValidateDelete allows every deletion.
func (v *Validator) ValidateDelete(context.Context, *deckhandv1alpha1.WebServer) (admission.Warnings, error) {
	return nil, nil
}

// validate checks a WebServer (old is nil on create). The CRD schema already
// checks the image reference format, the port range, replicas >= 0, the
// Service type and duplicate env names; this covers the rest.
func validate(old, ws *deckhandv1alpha1.WebServer) field.ErrorList {
	var errs field.ErrorList
	if old == nil {
		// The name names the Service, so it must be a DNS-1035 label.
		errs = append(errs, webhookutil.Check(field.NewPath("metadata", "name"), ws.Name, validation.IsDNS1035Label)...)
	}
	spec := field.NewPath("spec")
	errs = append(errs, validateEnv(ws.Spec.Env, spec.Child("env"))...)
	errs = append(errs, validateResources(ws.Spec.Resources, spec.Child("resources"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(ws.Spec.PodAnnotations, spec.Child("podAnnotations"))...)
	errs = append(errs, metav1validation.ValidateLabels(ws.Spec.PodLabels, spec.Child("podLabels"))...)
	for _, k := range []string{deckhandv1alpha1.WebServerNameLabel, deckhandv1alpha1.WebServerInstanceLabel, deckhandv1alpha1.ManagedByLabel} {
		if _, ok := ws.Spec.PodLabels[k]; ok {
			errs = append(errs, field.Forbidden(spec.Child("podLabels").Key(k), "Deckhand sets this label; it selects the WebServer's pods"))
		}
	}
	if ws.Spec.ReadinessProbe != nil {
		errs = append(errs, validateProbe(ws.Spec.ReadinessProbe, spec.Child("readinessProbe"))...)
	}
	// The kubelet requires a successThreshold of 1 for these two.
	for _, named := range []struct {
		name  string
		probe *corev1.Probe
	}{{"livenessProbe", ws.Spec.LivenessProbe}, {"startupProbe", ws.Spec.StartupProbe}} {
		name, probe := named.name, named.probe
		if probe == nil {
			continue
		}
		errs = append(errs, validateProbe(probe, spec.Child(name))...)
		if probe.SuccessThreshold > 1 {
			errs = append(errs, field.Invalid(spec.Child(name, "successThreshold"), probe.SuccessThreshold, "must be 1"))
		}
	}
	errs = append(errs, validatePodFields(&ws.Spec, spec)...)
	return errs
}

// validatePodFields checks the fields that name other objects and the
// drain against the grace period.
func validatePodFields(s *deckhandv1alpha1.WebServerSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, from := range s.EnvFrom {
		p := spec.Child("envFrom").Index(i)
		name := ""
		switch {
		case from.ConfigMapRef != nil && from.SecretRef == nil:
			name, p = from.ConfigMapRef.Name, p.Child("configMapRef", "name")
		case from.SecretRef != nil && from.ConfigMapRef == nil:
			name, p = from.SecretRef.Name, p.Child("secretRef", "name")
		default:
			errs = append(errs, field.Invalid(p, "", "must set exactly one of configMapRef or secretRef"))
			continue
		}
		errs = append(errs, dnsSubdomain(name, p)...)
		if from.Prefix != "" {
			errs = append(errs, webhookutil.Check(spec.Child("envFrom").Index(i).Child("prefix"), from.Prefix, validation.IsRelaxedEnvVarName)...)
		}
	}
	for i, ref := range s.ImagePullSecrets {
		errs = append(errs, dnsSubdomain(ref.Name, spec.Child("imagePullSecrets").Index(i).Child("name"))...)
	}
	if in := s.Ingress; in != nil && in.TLS != nil {
		errs = append(errs, dnsSubdomain(in.TLS.SecretName, spec.Child("ingress", "tls", "secretName"))...)
	}
	if in := s.Ingress; in != nil && in.ClassName != nil {
		errs = append(errs, dnsSubdomain(*in.ClassName, spec.Child("ingress", "className"))...)
	}
	if s.ServiceAccountName != "" {
		errs = append(errs, dnsSubdomain(s.ServiceAccountName, spec.Child("serviceAccountName"))...)
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if s.TerminationGracePeriodSeconds != nil {
		grace = *s.TerminationGracePeriodSeconds
	}
	if s.DrainSeconds != nil && int64(*s.DrainSeconds) >= grace {
		errs = append(errs, field.Invalid(spec.Child("drainSeconds"), *s.DrainSeconds,
			fmt.Sprintf("must be less than terminationGracePeriodSeconds (%d): the server needs time to stop after the drain", grace)))
	}
	return errs
}

func dnsSubdomain(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	return webhookutil.Check(path, name, validation.IsDNS1123Subdomain)
}

func validateEnv(env []corev1.EnvVar, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, e := range env {
		p := path.Index(i)
		if e.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), "an environment variable needs a name"))
		} else {
			// Kubernetes accepts any printable ASCII name without '=' since 1.34;
			// so does Deckhand, so that a name the Deployment accepts is never refused.
			errs = append(errs, webhookutil.Check(p.Child("name"), e.Name, validation.IsRelaxedEnvVarName)...)
		}
		if seen[e.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), e.Name))
		}
		seen[e.Name] = true
		if e.ValueFrom != nil {
			if e.Value != "" {
				errs = append(errs, field.Invalid(p.Child("valueFrom"), "", "may not be set when value is set"))
			}
			n := 0
			for _, set := range []bool{e.ValueFrom.FieldRef != nil, e.ValueFrom.ResourceFieldRef != nil,
				e.ValueFrom.ConfigMapKeyRef != nil, e.ValueFrom.SecretKeyRef != nil, e.ValueFrom.FileKeyRef != nil} {
				if set {
					n++
				}
			}
			if n != 1 {
				errs = append(errs, field.Invalid(p.Child("valueFrom"), "", fmt.Sprintf("must set exactly one source, not %d", n)))
			}
		}
	}
	return errs
}

func validateResources(r corev1.ResourceRequirements, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, req := range r.Requests {
		if lim, ok := r.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), req.String(),
				fmt.Sprintf("must be less than or equal to the %s limit of %s", name, lim.String())))
		}
	}
	for name, q := range r.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("limits").Key(string(name)), q.String(), "must not be negative"))
		}
	}
	for name, q := range r.Requests {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(path.Child("requests").Key(string(name)), q.String(), "must not be negative"))
		}
	}
	return errs
}

func validateProbe(p *corev1.Probe, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	if h := p.HTTPGet; h != nil {
		n++
		errs = append(errs, validatePort(h.Port, path.Child("httpGet", "port"))...)
	}
	if t := p.TCPSocket; t != nil {
		n++
		errs = append(errs, validatePort(t.Port, path.Child("tcpSocket", "port"))...)
	}
	if e := p.Exec; e != nil {
		n++
		if len(e.Command) == 0 {
			errs = append(errs, field.Required(path.Child("exec", "command"), "an exec probe needs a command"))
		}
	}
	if g := p.GRPC; g != nil {
		n++
		for _, msg := range validation.IsValidPortNum(int(g.Port)) {
			errs = append(errs, field.Invalid(path.Child("grpc", "port"), g.Port, msg))
		}
	}
	if n != 1 {
		errs = append(errs, field.Invalid(path, "", fmt.Sprintf("must set exactly one of httpGet, tcpSocket, exec or grpc, not %d", n)))
	}
	for _, f := range []struct {
		name string
		v    int32
	}{
		{"initialDelaySeconds", p.InitialDelaySeconds}, {"timeoutSeconds", p.TimeoutSeconds}, {"periodSeconds", p.PeriodSeconds},
		{"successThreshold", p.SuccessThreshold}, {"failureThreshold", p.FailureThreshold},
	} {
		if f.v < 0 {
			errs = append(errs, field.Invalid(path.Child(f.name), f.v, "must not be negative"))
		}
	}
	return errs
}

func validatePort(port intstr.IntOrString, path *field.Path) field.ErrorList {
	var msgs []string
	if port.Type == intstr.String {
		msgs = validation.IsValidPortName(port.StrVal)
	} else {
		msgs = validation.IsValidPortNum(port.IntValue())
	}
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(path, port.String(), msg))
	}
	return errs
}
