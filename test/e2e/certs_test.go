package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestCertificateRotation: with live admission traffic going on (dry-run
// creates of a PodSet, whose validating webhook fails closed, and of a Pod,
// whose mutating webhook fails open), first the serving certificate is
// rotated several times (it lives 40s and is renewed 30s before expiry),
// then the CA is put near its expiry and the manager replaces it. Each time
// the CA bundle of both webhook configurations follows the Secret, the
// served certificate chains to it, and the API server calls the webhooks
// without a single error.
func TestCertificateRotation(t *testing.T) {
	ns := namespace(t)
	// The mutating pod webhook fails open: an error would not reach the
	// client, but the API server counts it.
	failOpen := func() float64 {
		return apiserverMetric(t, "apiserver_admission_webhook_fail_open_count", "deckhand.dev")
	}
	failOpen0 := failOpen()
	traffic := startAdmissionTraffic(t, ns)

	// Phase 1: serving-certificate rotation, CA unchanged.
	ca := currentCA(t)
	seen := map[string]bool{}
	first := servedCert(t)
	seen[fingerprint(first)] = true
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		c := servedCert(t)
		if err := verifyChain(c, ca); err != nil {
			return false, fmt.Errorf("served certificate does not chain to the CA in the Secret: %w", err)
		}
		seen[fingerprint(c)] = true
		return len(seen) >= 3, nil
	}, "the manager serves 3 successive certificates (seen %d)", len(seen))
	assertBundles(t, ca)
	if errs := traffic.errors(); len(errs) > 0 {
		t.Fatalf("%d of %d admission requests failed during serving-certificate rotation; first: %v", len(errs), traffic.total(), errs[0])
	}
	if n := failOpen() - failOpen0; n > 0 {
		t.Errorf("the API server failed open on a Deckhand webhook %v times during serving-certificate rotation", n)
	}
	t.Logf("phase 1: %d serving certificates, %d admission requests, no error", len(seen), traffic.total())

	// Phase 2: the CA. Replace the Secret's CA by one that expires 45s from
	// now (as a CA at the end of its life would), wait until it is in use,
	// then let the manager notice it is within its 30s lookahead and
	// rotate it.
	nearCA := installNearExpiryCA(t, 45*time.Second)
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		return bundlesTrust(t, nearCA) && verifyChain(servedCert(t), nearCA) == nil, nil
	}, "the near-expiry CA is injected and a certificate it signed is served")
	traffic.reset()
	failOpen2 := failOpen()
	var newCA []byte
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		newCA = currentCA(t)
		if bytes.Equal(newCA, nearCA) {
			return false, nil
		}
		return bundlesTrust(t, newCA) && verifyChain(servedCert(t), newCA) == nil, nil
	}, "the manager rotates the CA: a new CA in the Secret, in both webhook configurations, and a certificate it signed served")
	// The overlap that makes the switch safe: the previous CA is still
	// trusted next to the new one until it expires.
	if !bundlesHold(t, nearCA) {
		t.Error("the previous CA left the caBundle before it expired; replicas still serving its certificate would be refused")
	}
	notAfter := parseCert(t, newCA).NotAfter
	if time.Until(notAfter) < 365*24*time.Hour {
		t.Errorf("the new CA expires at %s, want the default 10-year validity", notAfter)
	}
	// Keep the traffic going a little on the new CA.
	time.Sleep(3 * time.Second) // not an assertion: more traffic on the new CA
	if errs := traffic.errors(); len(errs) > 0 {
		t.Fatalf("%d of %d admission requests failed during CA rotation; first: %v", len(errs), traffic.total(), errs[0])
	}
	t.Logf("phase 2: CA rotated, %d admission requests, no error", traffic.total())
	traffic.stop()
	if n := failOpen() - failOpen2; n > 0 {
		t.Errorf("the API server failed open on a Deckhand webhook %v times during CA rotation", n)
	}
}

// admissionTraffic issues dry-run creates through Deckhand's webhooks in the
// background and records failures.
type admissionTraffic struct {
	mu     sync.Mutex
	errs   []error
	n      int
	cancel context.CancelFunc
	done   chan struct{}
}

func startAdmissionTraffic(t *testing.T, ns string) *admissionTraffic {
	ctx, cancel := context.WithCancel(context.Background())
	tr := &admissionTraffic{cancel: cancel, done: make(chan struct{})}
	t.Cleanup(tr.stop)
	labels := map[string]string{"app": "traffic"}
	go func() {
		defer close(tr.done)
		for i := 0; ctx.Err() == nil; i++ {
			ps := testutil.PodSet(ns, "traffic-"+strconv.Itoa(i), 1, labels, corev1.Container{Name: "c", Image: "registry.k8s.io/pause:3.10"})
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "traffic-" + strconv.Itoa(i), Namespace: ns, Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
			}
			for _, obj := range []client.Object{ps, pod} {
				rctx, rcancel := context.WithTimeout(ctx, 15*time.Second)
				err := suite.client.Create(rctx, obj, client.DryRunAll)
				rcancel()
				if ctx.Err() != nil {
					return
				}
				tr.mu.Lock()
				tr.n++
				if err != nil {
					tr.errs = append(tr.errs, fmt.Errorf("%s: %w", time.Now().Format(time.StampMilli), err))
				}
				tr.mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return tr
}

func (tr *admissionTraffic) errors() []error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]error(nil), tr.errs...)
}

func (tr *admissionTraffic) total() int { tr.mu.Lock(); defer tr.mu.Unlock(); return tr.n }

func (tr *admissionTraffic) reset() { tr.mu.Lock(); tr.errs, tr.n = nil, 0; tr.mu.Unlock() }

func (tr *admissionTraffic) stop() { tr.cancel(); <-tr.done }

// servedCert is the certificate the manager's webhook server presents now.
func servedCert(t *testing.T) *x509.Certificate {
	t.Helper()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(suite.webhookPort))
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
		&tls.Config{ServerName: "localhost", InsecureSkipVerify: true}) //nolint:gosec // the chain is verified by verifyChain
	if err != nil {
		t.Fatalf("connecting to the webhook server: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:8])
}

func verifyChain(c *x509.Certificate, caPEM []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("no CA certificate in %q", caPEM)
	}
	_, err := c.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err
}

func parseCert(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(p)
	if b == nil {
		t.Fatalf("no PEM in %q", p)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func certificateSecret(t *testing.T) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := suite.client.Get(tctx(t), client.ObjectKey{Namespace: systemNamespace, Name: certSecret}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func currentCA(t *testing.T) []byte {
	t.Helper()
	ca := certificateSecret(t).Data["ca.crt"]
	if len(ca) == 0 {
		t.Fatalf("Secret %s/%s has no ca.crt", systemNamespace, certSecret)
	}
	return ca
}

// bundles returns the caBundle of every webhook of both configurations.
func bundles(t *testing.T) map[string][]byte {
	t.Helper()
	ctx := tctx(t)
	out := map[string][]byte{}
	m, err := suite.clientset.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mutatingConfig, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range m.Webhooks {
		out[h.Name] = h.ClientConfig.CABundle
	}
	v, err := suite.clientset.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, validatingConfig, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range v.Webhooks {
		out[h.Name] = h.ClientConfig.CABundle
	}
	return out
}

// bundlesTrust reports whether every webhook's caBundle leads with ca (the
// CA in the Secret) and holds at most one other, earlier CA: Deckhand keeps
// the previous CA trusted while replicas switch certificates.
func bundlesTrust(t *testing.T, ca []byte) bool {
	return bundleProblem(t, ca) == ""
}

func bundleProblem(t *testing.T, ca []byte) string {
	t.Helper()
	want := parseCert(t, ca)
	for name, b := range bundles(t) {
		certs := pemCerts(t, b)
		if len(certs) == 0 || !certs[0].Equal(want) {
			return fmt.Sprintf("webhook %s's caBundle does not lead with the CA in the Secret", name)
		}
		if len(certs) > 2 {
			return fmt.Sprintf("webhook %s's caBundle holds %d CAs, want at most the current and one previous", name, len(certs))
		}
	}
	return ""
}

// bundlesHold reports whether every webhook's caBundle contains ca.
func bundlesHold(t *testing.T, ca []byte) bool {
	t.Helper()
	want := parseCert(t, ca)
	for _, b := range bundles(t) {
		found := false
		for _, c := range pemCerts(t, b) {
			found = found || c.Equal(want)
		}
		if !found {
			return false
		}
	}
	return true
}

func assertBundles(t *testing.T, ca []byte) {
	t.Helper()
	if p := bundleProblem(t, ca); p != "" {
		t.Error(p)
	}
}

func pemCerts(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("caBundle holds an unparsable certificate: %v", err)
		}
		out = append(out, c)
	}
}

// managerExtraDNSNames are the names besides the webhook Service's that the
// manager under test issues its serving certificate for (--cert-extra-dns-names
// adds localhost); it replaces a certificate that lacks one.
var managerExtraDNSNames = []string{
	"deckhand-webhook-service." + systemNamespace + ".svc.cluster.local",
	metricsService + "." + systemNamespace + ".svc",
	metricsService + "." + systemNamespace + ".svc.cluster.local",
	"localhost",
}

// servingCertRotator issues certificates as the manager under test does,
// for the webhook Service and for extra.
func servingCertRotator(extra ...string) *rotator.CertRotator {
	return &rotator.CertRotator{
		CAName: "deckhand-ca", CAOrganization: "deckhand",
		DNSName:       "deckhand-webhook-service." + systemNamespace + ".svc",
		ExtraDNSNames: extra,
		ExtKeyUsages:  &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
}

// installNearExpiryCA writes into the certificate Secret a CA, and a serving
// certificate it signed, both expiring after d, and returns the CA.
func installNearExpiryCA(t *testing.T, d time.Duration) []byte {
	t.Helper()
	gen := servingCertRotator(managerExtraDNSNames...)
	now := time.Now()
	ca, err := gen.CreateCACert(now.Add(-time.Hour), now.Add(d))
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := gen.CreateCertPEM(ca, now.Add(-time.Hour), now.Add(d))
	if err != nil {
		t.Fatal(err)
	}
	s := certificateSecret(t)
	s.Data["ca.crt"], s.Data["ca.key"], s.Data["tls.crt"], s.Data["tls.key"] = ca.CertPEM, ca.KeyPEM, cert, key
	if err := suite.client.Update(tctx(t), s); err != nil {
		t.Fatal(err)
	}
	return ca.CertPEM
}

// apiserverMetric sums the samples of metric whose labels contain substr.
func apiserverMetric(t *testing.T, metric, substr string) float64 {
	t.Helper()
	raw, err := suite.clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(tctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, metric+"{") || !strings.Contains(line, substr) {
			continue
		}
		if f := strings.Fields(line); len(f) >= 2 {
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err == nil {
				sum += v
			}
		}
	}
	return sum
}
