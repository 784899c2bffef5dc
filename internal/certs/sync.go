package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// File names in the certificate directory, as controller-runtime's webhook
// server and the rotator's Secret use them.
const (
	certFile = "tls.crt"
	keyFile  = "tls.key"
	caFile   = "ca.crt"
	// caKeyFile is only in the Secret, never written to the directory.
	caKeyFile = "ca.key"
)

// addSecretSync injects the Secret's CA into Deckhand's webhook
// configurations (keeping the previous CA, see mergeCABundle) and then keeps
// dir's tls.crt/tls.key/ca.crt equal to the Secret's. It runs on every
// replica and watches only that one Secret (a field selector on its name)
// and the webhook configurations.
//
// The order matters: a replica writes a serving certificate only once the
// webhook configurations trust the CA that signed it, so the API server
// never meets a certificate it cannot verify.
//
// In a pod, a Secret volume would be updated by the kubelet only after its
// sync period (a minute or more) and not at all for a manager running
// outside the cluster; writing the files here makes a rotated certificate
// served within moments by every replica, with an emptyDir as certificate
// directory.
func addSecretSync(mgr ctrl.Manager, key types.NamespacedName, issuer *rotator.CertRotator, o Options) error {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(),
		Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{key.Namespace: {}},
				Field:      fields.OneTermEqualSelector("metadata.name", key.Name),
			},
		},
	})
	if err != nil {
		return fmt.Errorf("creating the certificate Secret cache: %w", err)
	}
	// Writes go straight to the API server; reads come from the cache above.
	writer, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return err
	}
	s := &secretSync{
		cache: c, writer: writer, key: key, dir: o.CertDir, issuer: issuer,
		mutating: o.MutatingWebhookConfigurations, validating: o.ValidatingWebhookConfigurations,
		interval: o.RotationCheckInterval,
		trigger:  make(chan struct{}, 1),
		log:      ctrl.Log.WithName("certs").WithValues("secret", key.String(), "dir", o.CertDir),
	}
	for _, obj := range []client.Object{&corev1.Secret{}, &admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		inf, err := c.GetInformer(context.Background(), obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { s.poke() },
			UpdateFunc: func(_, _ any) { s.poke() },
		}); err != nil {
			return err
		}
	}
	if err := mgr.Add(&unelectedCache{Cache: c}); err != nil {
		return err
	}
	return mgr.Add(s)
}

// unelectedCache runs on every replica, leader or not.
type unelectedCache struct{ cache.Cache }

func (unelectedCache) NeedLeaderElection() bool { return false }

// secretSync is the runnable behind addSecretSync.
type secretSync struct {
	cache                cache.Cache
	writer               client.Client
	key                  types.NamespacedName
	dir                  string
	issuer               *rotator.CertRotator
	mutating, validating []string
	interval             time.Duration
	trigger              chan struct{}
	log                  logr.Logger
}

// NeedLeaderElection is false: standby replicas serve webhooks too.
func (s *secretSync) NeedLeaderElection() bool { return false }

func (s *secretSync) poke() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// Start syncs on every change and every interval (so that an expired
// previous CA leaves the bundle), retrying failures after a second.
func (s *secretSync) Start(ctx context.Context) error {
	if !s.cache.WaitForCacheSync(ctx) {
		return nil
	}
	tick := time.NewTicker(s.interval)
	defer tick.Stop()
	s.poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-s.trigger:
		}
		if err := s.sync(ctx); err != nil {
			s.log.Error(err, "syncing webhook certificates; retrying")
			time.AfterFunc(time.Second, s.poke)
		}
	}
}

func (s *secretSync) sync(ctx context.Context) error {
	secret := &corev1.Secret{}
	if err := s.cache.Get(ctx, s.key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // the rotator creates it
		}
		return err
	}
	ca := secret.Data[caFile]
	if len(ca) == 0 || len(secret.Data[certFile]) == 0 {
		return nil // the rotator fills it
	}
	if missing := missingDNSNames(secret.Data[certFile], append([]string{s.issuer.DNSName}, s.issuer.ExtraDNSNames...)); len(missing) > 0 {
		return s.reissue(ctx, secret, missing)
	}
	if err := s.inject(ctx, ca); err != nil {
		return fmt.Errorf("injecting the CA bundle: %w", err)
	}
	changed, err := WriteFiles(s.dir, secret.Data)
	if err != nil {
		return fmt.Errorf("writing webhook certificate files: %w", err)
	}
	if changed {
		s.log.Info("webhook certificate files updated", "resourceVersion", secret.ResourceVersion)
	}
	return nil
}

// reissue replaces a serving certificate that lacks some of the names the
// rotator issues for with one it signs with the Secret's CA, as the rotator
// would. The rotator renews a certificate only when its first name fails to
// verify: one issued before a name was added (the metrics Service's, on an
// upgrade) would otherwise lack it until it expires. A replica of an older
// version, still running, finds the new certificate valid and keeps it.
func (s *secretSync) reissue(ctx context.Context, secret *corev1.Secret, missing []string) error {
	ca, err := ParseCA(secret.Data)
	if err != nil {
		return err
	}
	now := time.Now()
	cert, key, err := s.issuer.CreateCertPEM(ca, now.Add(-time.Hour), now.Add(s.issuer.ServerCertDuration))
	if err != nil {
		return fmt.Errorf("issuing a serving certificate: %w", err)
	}
	secret = secret.DeepCopy()
	secret.Data[certFile], secret.Data[keyFile] = cert, key
	if err := s.writer.Update(ctx, secret, client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
		return fmt.Errorf("replacing a serving certificate that lacks %v: %w", missing, err)
	}
	s.log.Info("serving certificate issued again: the previous one lacked names", "missing", missing)
	return nil
}

// ParseCA returns the CA of a certificate Secret's data (ca.crt, and ca.key
// in PKCS #1 as the rotator writes it), ready to sign with.
func ParseCA(data map[string][]byte) (*rotator.KeyPairArtifacts, error) {
	certBlock, _ := pem.Decode(data[caFile])
	keyBlock, _ := pem.Decode(data[caKeyFile])
	if certBlock == nil || keyBlock == nil {
		return nil, errors.New("the Secret holds no CA certificate and key")
	}
	cert, certErr := x509.ParseCertificate(certBlock.Bytes)
	key, keyErr := x509.ParsePKCS1PrivateKey(keyBlock.Bytes)
	if err := errors.Join(certErr, keyErr); err != nil {
		return nil, fmt.Errorf("parsing the Secret's CA: %w", err)
	}
	return &rotator.KeyPairArtifacts{Cert: cert, Key: key, CertPEM: data[caFile], KeyPEM: data[caKeyFile]}, nil
}

// missingDNSNames returns the names of want that certPEM is not issued for;
// none for a certificate that does not parse (the rotator replaces it).
func missingDNSNames(certPEM []byte, want []string) []string {
	block, _ := pem.Decode(certPEM)
	if block == nil {
		return nil
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil
	}
	var missing []string
	for _, name := range want {
		// As the rotator writes them: every name a DNS name of its own.
		if !slices.Contains(cert.DNSNames, name) {
			missing = append(missing, name)
		}
	}
	return missing
}

// inject makes every webhook of the configured configurations trust ca
// (plus the previous CA), writing only what differs.
func (s *secretSync) inject(ctx context.Context, ca []byte) error {
	type target struct {
		name          string
		cfg           client.Object
		clientConfigs func() []*admissionregistrationv1.WebhookClientConfig
	}
	var targets []target
	for _, name := range s.mutating {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		targets = append(targets, target{name, cfg, func() []*admissionregistrationv1.WebhookClientConfig {
			return clientConfigsOf(cfg.Webhooks, func(w *admissionregistrationv1.MutatingWebhook) *admissionregistrationv1.WebhookClientConfig {
				return &w.ClientConfig
			})
		}})
	}
	for _, name := range s.validating {
		cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		targets = append(targets, target{name, cfg, func() []*admissionregistrationv1.WebhookClientConfig {
			return clientConfigsOf(cfg.Webhooks, func(w *admissionregistrationv1.ValidatingWebhook) *admissionregistrationv1.WebhookClientConfig {
				return &w.ClientConfig
			})
		}})
	}
	for _, t := range targets {
		if err := s.injectInto(ctx, t.name, t.cfg, ca, t.clientConfigs); err != nil {
			return err
		}
	}
	return nil
}

// clientConfigsOf points at the client config of each of webhooks, which
// mutating and validating configurations keep in webhooks of different types.
func clientConfigsOf[W any](webhooks []W, clientConfig func(*W) *admissionregistrationv1.WebhookClientConfig) []*admissionregistrationv1.WebhookClientConfig {
	out := make([]*admissionregistrationv1.WebhookClientConfig, len(webhooks))
	for i := range webhooks {
		out[i] = clientConfig(&webhooks[i])
	}
	return out
}

// injectInto reads the webhook configuration name into cfg (a copy from
// the cache), sets the bundle on every client config clientConfigs returns
// and updates it if anything differed. A missing configuration is skipped.
func (s *secretSync) injectInto(ctx context.Context, name string, cfg client.Object, ca []byte, clientConfigs func() []*admissionregistrationv1.WebhookClientConfig) error {
	if err := s.cache.Get(ctx, types.NamespacedName{Name: name}, cfg); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	configs := clientConfigs()
	var current [][]byte
	for _, cc := range configs {
		current = append(current, cc.CABundle)
	}
	want, changed := desiredBundles(ca, current, time.Now())
	if !changed {
		return nil
	}
	for _, cc := range configs {
		cc.CABundle = want
	}
	if err := s.writer.Update(ctx, cfg, client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
		return err
	}
	s.log.Info("CA bundle injected", "webhookconfiguration", name)
	return nil
}

// desiredBundles returns the bundle every webhook of a configuration should
// carry, given their current bundles, and whether any of them differs. The
// previous CA is taken from the first webhook that already trusts one.
func desiredBundles(ca []byte, current [][]byte, now time.Time) ([]byte, bool) {
	var installed []byte
	for _, b := range current {
		if len(b) > 0 {
			installed = b
			break
		}
	}
	want := mergeCABundle(ca, installed, now)
	for _, b := range current {
		if !bytes.Equal(b, want) {
			return want, true
		}
	}
	return want, false
}

// WriteFiles writes the certificate, key and CA of data (a kubernetes.io/tls
// style map) into dir when they differ from what is there, each file
// replaced atomically by a rename. It writes nothing while the certificate
// and key are missing or do not form a valid pair, and reports whether it
// wrote anything.
func WriteFiles(dir string, data map[string][]byte) (bool, error) {
	cert, key := data[certFile], data[keyFile]
	if len(cert) == 0 || len(key) == 0 {
		return false, nil
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return false, fmt.Errorf("the Secret's certificate and key do not match: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	changed := false
	// The key goes first: the webhook server reloads on each file event and
	// keeps its previous pair until both files match again.
	for _, f := range []struct {
		name string
		data []byte
	}{{keyFile, key}, {certFile, cert}, {caFile, data[caFile]}} {
		if len(f.data) == 0 {
			continue
		}
		path := filepath.Join(dir, f.name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, f.data) {
			continue
		}
		tmp, err := os.CreateTemp(dir, "."+f.name+"-")
		if err != nil {
			return changed, err
		}
		if _, err := tmp.Write(f.data); err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			return changed, err
		}
		if err := tmp.Close(); err != nil {
			os.Remove(tmp.Name())
			return changed, err
		}
		if err := os.Rename(tmp.Name(), path); err != nil {
			os.Remove(tmp.Name())
			return changed, err
		}
		changed = true
	}
	return changed, nil
}
