// Package certs provides the webhook server's TLS certificates.
//
// In the default "self" mode Deckhand manages them itself with the
// certificate rotator Gatekeeper uses (github.com/open-policy-agent/cert-controller):
// a CA and a serving certificate live in a Secret in Deckhand's namespace,
// the CA is injected into Deckhand's webhook configurations, and both are
// renewed well before they expire. Every replica runs the rotator (the
// Secret update is optimistic-concurrency safe, so two replicas never
// disagree) and writes the Secret's current certificate into its webhook
// certificate directory, from which controller-runtime's webhook server
// reloads it without a restart.
//
// In "external" mode something else (cert-manager, or a mounted Secret)
// puts tls.crt and tls.key into the certificate directory and injects the CA.
package certs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// Modes of certificate management.
const (
	// ModeSelf: Deckhand creates, rotates and injects its certificates.
	ModeSelf = "self"
	// ModeExternal: certificates are provided (cert-manager, a mounted Secret).
	ModeExternal = "external"
)

// Manager permissions of the rotator, in roles of their own
// (manager-certs-role) that only self-managed certificates need: with
// cert-manager (external mode) the installation grants none of them. The
// Secret is only in Deckhand's own namespace (a Role, not cluster-wide); the
// webhook configurations are cluster-scoped, listed and watched by the
// rotator's cache, but only Deckhand's own two may be read by name or updated.
//
// +kubebuilder:rbac:groups="",namespace=deckhand-system,resources=secrets,verbs=get;list;watch,roleName=manager-certs-role
// +kubebuilder:rbac:groups="",namespace=deckhand-system,resources=secrets,verbs=update,resourceNames=deckhand-webhook-server-cert,roleName=manager-certs-role
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=list;watch,roleName=manager-certs-role
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;update,resourceNames=deckhand-mutating-webhook-configuration;deckhand-validating-webhook-configuration,roleName=manager-certs-role

// Options configure certificate management. The zero durations mean the
// defaults of DefaultOptions.
type Options struct {
	// Mode is ModeSelf or ModeExternal.
	Mode string
	// CertDir is the webhook server's certificate directory (tls.crt, tls.key).
	CertDir string
	// SecretName and SecretNamespace name the Secret holding the CA and the
	// serving certificate. An empty namespace means the manager's own
	// (read from the mounted service-account token).
	SecretName      string
	SecretNamespace string
	// ServiceName is the webhook Service; the serving certificate is for
	// <ServiceName>.<SecretNamespace>.svc.
	ServiceName string
	// MetricsServiceName is the metrics Service; the serving certificate is
	// for <MetricsServiceName>.<SecretNamespace>.svc too, because the metrics
	// server serves it as well (a ServiceMonitor verifies it by that name).
	MetricsServiceName string
	// ExtraDNSNames are added to the serving certificate (for example
	// "localhost" for a manager run on a developer's host).
	ExtraDNSNames []string
	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations get
	// the CA bundle injected into every webhook they hold.
	MutatingWebhookConfigurations   []string
	ValidatingWebhookConfigurations []string
	// CAValidity and CertValidity are the lifetimes of new certificates.
	CAValidity   time.Duration
	CertValidity time.Duration
	// RotationLookahead: a certificate is renewed once it would be expired
	// this long from now. RotationCheckInterval: how often that is checked
	// (the Secret is also checked on every change).
	RotationLookahead     time.Duration
	RotationCheckInterval time.Duration
}

// DefaultOptions are the manager's defaults: a 10-year CA, a 1-year serving
// certificate renewed 90 days before it expires, checked every hour.
func DefaultOptions() Options {
	return Options{
		Mode:                            ModeSelf,
		SecretName:                      "deckhand-webhook-server-cert",
		ServiceName:                     "deckhand-webhook-service",
		MetricsServiceName:              "deckhand-controller-manager-metrics-service",
		MutatingWebhookConfigurations:   []string{"deckhand-mutating-webhook-configuration"},
		ValidatingWebhookConfigurations: []string{"deckhand-validating-webhook-configuration"},
		CAValidity:                      10 * 365 * 24 * time.Hour,
		CertValidity:                    365 * 24 * time.Hour,
		RotationLookahead:               90 * 24 * time.Hour,
		RotationCheckInterval:           time.Hour,
	}
}

// Validate reports inconsistent options.
func (o Options) Validate() error {
	var errs []error
	switch o.Mode {
	case ModeSelf:
		if o.SecretName == "" || o.ServiceName == "" {
			errs = append(errs, errors.New("--cert-secret-name and --webhook-service-name must be set with --cert-management=self"))
		}
		if o.CertValidity <= o.RotationLookahead || o.CAValidity <= o.RotationLookahead {
			errs = append(errs, fmt.Errorf("certificate validity (CA %s, serving %s) must be longer than the rotation lookahead %s, or every check would rotate",
				o.CAValidity, o.CertValidity, o.RotationLookahead))
		}
		if o.RotationCheckInterval <= 0 {
			errs = append(errs, errors.New("--cert-rotation-check-interval must be positive"))
		}
	case ModeExternal:
	default:
		errs = append(errs, fmt.Errorf("--cert-management must be %q or %q, not %q", ModeSelf, ModeExternal, o.Mode))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("the webhook certificate directory must be set"))
	}
	return errors.Join(errs...)
}

func (o Options) namespace() (string, error) {
	if o.SecretNamespace != "" {
		return o.SecretNamespace, nil
	}
	if ns := podutil.OwnNamespace(); ns != "" {
		return ns, nil
	}
	return "", errors.New("not running in a pod and POD_NAMESPACE is not set: set --cert-secret-namespace")
}

// DNSName is the name the serving certificate is issued for.
func (o Options) DNSName(namespace string) string {
	return o.ServiceName + "." + namespace + ".svc"
}

// Setup adds certificate management to mgr and returns a channel that is
// closed once the webhook server can serve: in self mode when the
// certificate files are in CertDir and the CA bundle has been injected, in
// external mode at once.
func Setup(mgr ctrl.Manager, o Options) (<-chan struct{}, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ready := make(chan struct{})
	if o.Mode == ModeExternal {
		close(ready)
		return ready, nil
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	key := types.NamespacedName{Namespace: ns, Name: o.SecretName}
	dnsName := o.DNSName(ns)
	extra := []string{dnsName + ".cluster.local"}
	if o.MetricsServiceName != "" {
		metrics := o.MetricsServiceName + "." + ns + ".svc"
		extra = append(extra, metrics, metrics+".cluster.local")
	}
	extra = append(extra, o.ExtraDNSNames...)
	issuer := &rotator.CertRotator{
		SecretKey:      key,
		CertDir:        o.CertDir,
		CAName:         "deckhand-ca",
		CAOrganization: "deckhand",
		DNSName:        dnsName,
		ExtraDNSNames:  extra,
		IsReady:        ready,
		// No Webhooks: the CA bundle is injected by addSecretSync, which
		// keeps the previous CA during a CA rotation (see mergeCABundle).
		// With none to inject, the rotator is ready once the certificate
		// files are in CertDir, and addSecretSync writes them only after
		// the injection.
		FieldOwner: "deckhand",
		// Every replica keeps the certificates valid and becomes ready on
		// its own; a standby replica must serve webhooks too.
		RequireLeaderElection:  false,
		CaCertDuration:         o.CAValidity,
		ServerCertDuration:     o.CertValidity,
		LookaheadInterval:      o.RotationLookahead,
		RotationCheckFrequency: o.RotationCheckInterval,
		EnableReadinessCheck:   true,
	}
	if err := rotator.AddRotator(mgr, issuer); err != nil {
		return nil, fmt.Errorf("adding the certificate rotator: %w", err)
	}
	if err := addSecretSync(mgr, key, issuer, o); err != nil {
		return nil, err
	}
	ctrl.Log.WithName("certs").Info("managing webhook certificates", "secret", key.String(), "dnsName", dnsName, "extraDNSNames", extra)
	return ready, nil
}

// Gate is a manager runnable that runs setup (registering the controllers
// and webhooks) once ready is closed, so that neither the webhook server nor
// a controller starts before the certificates exist. It runs on every
// replica, leader or not.
type Gate struct {
	ready <-chan struct{}
	setup func() error
	done  chan struct{}
}

// NewGate returns a Gate; add it to the manager with mgr.Add.
func NewGate(ready <-chan struct{}, setup func() error) *Gate {
	return &Gate{ready: ready, setup: setup, done: make(chan struct{})}
}

// Start waits for the certificates, runs setup and returns. An error from
// setup stops the manager.
func (g *Gate) Start(ctx context.Context) error {
	select {
	case <-g.ready:
	case <-ctx.Done():
		return nil
	}
	if err := g.setup(); err != nil {
		return err
	}
	close(g.done)
	return nil
}

// NeedLeaderElection is false: standby replicas serve webhooks too.
func (g *Gate) NeedLeaderElection() bool { return false }

// Checker is a readiness check that fails until setup has run and then
// delegates to next (for example the webhook server's StartedChecker, which
// must not be asked for before setup registered the webhooks).
func (g *Gate) Checker(next func() healthz.Checker) healthz.Checker {
	var (
		once     sync.Once
		delegate healthz.Checker
	)
	return func(req *http.Request) error {
		select {
		case <-g.done:
		default:
			select {
			case <-g.ready:
				return errors.New("certificates ready, controllers and webhooks being set up")
			default:
				return errors.New("waiting for webhook certificates")
			}
		}
		once.Do(func() { delegate = next() })
		return delegate(req)
	}
}
