package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

func TestValidate(t *testing.T) {
	valid := DefaultOptions()
	valid.CertDir = "/tmp/certs"
	tests := map[string]struct {
		mutate  func(*Options)
		wantErr string
	}{
		"defaults":              {mutate: func(*Options) {}},
		"external":              {mutate: func(o *Options) { o.Mode = ModeExternal; o.SecretName = "" }},
		"unknown mode":          {mutate: func(o *Options) { o.Mode = "auto" }, wantErr: `--cert-management must be "self" or "external"`},
		"no cert dir":           {mutate: func(o *Options) { o.CertDir = "" }, wantErr: "certificate directory"},
		"no secret name":        {mutate: func(o *Options) { o.SecretName = "" }, wantErr: "--cert-secret-name"},
		"lookahead beyond cert": {mutate: func(o *Options) { o.CertValidity = o.RotationLookahead }, wantErr: "longer than the rotation lookahead"},
		"lookahead beyond CA":   {mutate: func(o *Options) { o.CAValidity = time.Hour }, wantErr: "longer than the rotation lookahead"},
		"zero check interval":   {mutate: func(o *Options) { o.RotationCheckInterval = 0 }, wantErr: "--cert-rotation-check-interval"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := valid
			tc.mutate(&o)
			err := o.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestDNSName(t *testing.T) {
	if got := DefaultOptions().DNSName("deckhand-system"); got != "deckhand-webhook-service.deckhand-system.svc" {
		t.Fatalf("DNSName = %q", got)
	}
}

// pair returns a CA and a serving certificate + key as the rotator makes them.
func pair(t *testing.T) (ca, cert, key []byte) {
	t.Helper()
	r := &rotator.CertRotator{CAName: "ca", DNSName: "svc", ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	now := time.Now()
	a, err := r.CreateCACert(now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	c, k, err := r.CreateCertPEM(a, now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return a.CertPEM, c, k
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	ca, cert, key := pair(t)

	changed, err := WriteFiles(dir, map[string][]byte{})
	if err != nil || changed {
		t.Fatalf("empty Secret: changed=%v err=%v, want nothing written", changed, err)
	}
	if _, err := os.Stat(filepath.Join(dir, certFile)); !os.IsNotExist(err) {
		t.Fatalf("a file was written for an empty Secret: %v", err)
	}

	data := map[string][]byte{certFile: cert, keyFile: key, caFile: ca, "ca.key": []byte("never written")}
	if changed, err := WriteFiles(dir, data); err != nil || !changed {
		t.Fatalf("first write: changed=%v err=%v", changed, err)
	}
	for name, want := range map[string][]byte{certFile: cert, keyFile: key, caFile: ca} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: err=%v, content differs=%v", name, err, string(got) != string(want))
		}
		st, _ := os.Stat(filepath.Join(dir, name))
		if st != nil && st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", name, st.Mode().Perm())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.key")); !os.IsNotExist(err) {
		t.Error("the CA key was written to the certificate directory")
	}
	if changed, err := WriteFiles(dir, data); err != nil || changed {
		t.Fatalf("same data again: changed=%v err=%v, want no write", changed, err)
	}

	// A new pair replaces the old one.
	_, cert2, key2 := pair(t)
	if changed, err := WriteFiles(dir, map[string][]byte{certFile: cert2, keyFile: key2}); err != nil || !changed {
		t.Fatalf("rotated pair: changed=%v err=%v", changed, err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, certFile)); string(got) != string(cert2) {
		t.Error("tls.crt was not replaced")
	}

	// A mismatched pair is refused and leaves the files alone.
	if _, err := WriteFiles(dir, map[string][]byte{certFile: cert, keyFile: key2}); err == nil {
		t.Fatal("a certificate with another certificate's key was accepted")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, certFile)); string(got) != string(cert2) {
		t.Error("a refused pair changed tls.crt")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

func TestGate(t *testing.T) {
	ready := make(chan struct{})
	setupRan := make(chan struct{})
	g := NewGate(ready, func() error { close(setupRan); return nil })
	if g.NeedLeaderElection() {
		t.Fatal("the gate must run on every replica")
	}
	next := func() healthz.Checker { return func(*http.Request) error { return nil } }
	check := g.Checker(next)

	if err := check(nil); err == nil || !strings.Contains(err.Error(), "waiting for webhook certificates") {
		t.Fatalf("before the certificates: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Start(context.Background()) }()
	select {
	case <-setupRan:
		t.Fatal("setup ran before the certificates were ready")
	case <-time.After(50 * time.Millisecond):
	}
	close(ready)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-setupRan
	if err := check(nil); err != nil {
		t.Fatalf("after setup: %v", err)
	}

	// A failing setup is the gate's error (it stops the manager), and the
	// replica never becomes ready.
	closed := make(chan struct{})
	close(closed)
	bad := NewGate(closed, func() error { return errors.New("boom") })
	if err := bad.Start(context.Background()); err == nil || err.Error() != "boom" {
		t.Fatalf("Start = %v, want boom", err)
	}
	if err := bad.Checker(next)(nil); err == nil {
		t.Fatal("a replica whose setup failed is ready")
	}

	// A cancelled manager stops a gate still waiting.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := NewGate(make(chan struct{}), func() error { t.Error("setup ran"); return nil }).Start(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestFileCertificate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	fc := NewFileCertificate(dir)
	if _, err := fc.GetCertificate(nil); err == nil {
		t.Fatal("a certificate was served before any was written")
	}
	served := func() []byte {
		t.Helper()
		c, err := fc.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Certificate[0]
	}
	leaf := func(certPEM []byte) []byte {
		block, _ := pem.Decode(certPEM)
		return block.Bytes
	}

	_, cert1, key1 := pair(t)
	if _, err := WriteFiles(dir, map[string][]byte{certFile: cert1, keyFile: key1}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served(), leaf(cert1)) {
		t.Fatal("the written certificate is not served")
	}

	// A rotation: the key is replaced before the certificate, and the pair
	// in between does not match; the previous pair is served meanwhile.
	_, cert2, key2 := pair(t)
	if err := os.WriteFile(filepath.Join(dir, keyFile), key2, 0o600); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served(), leaf(cert1)) {
		t.Fatal("a half-written pair replaced the previous certificate")
	}
	if err := os.WriteFile(filepath.Join(dir, certFile), cert2, 0o600); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(served(), leaf(cert2)) {
		t.Fatal("the renewed certificate is not served")
	}
}

func TestMissingDNSNames(t *testing.T) {
	_, cert, _ := pair(t) // issued for "svc" only
	cases := map[string]struct {
		cert []byte
		want []string
		miss []string
	}{
		"all names":         {cert: cert, want: []string{"svc"}},
		"a name added":      {cert: cert, want: []string{"svc", "metrics.ns.svc"}, miss: []string{"metrics.ns.svc"}},
		"not a certificate": {cert: []byte("garbage"), want: []string{"svc", "metrics.ns.svc"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := missingDNSNames(tc.cert, tc.want); !slices.Equal(got, tc.miss) {
				t.Errorf("missing %v, want %v", got, tc.miss)
			}
		})
	}
}

func TestParseCA(t *testing.T) {
	gen := &rotator.CertRotator{CAName: "ca", DNSName: "svc", ExtraDNSNames: []string{"metrics.ns.svc"}, ExtKeyUsages: &[]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	now := time.Now()
	ca, err := gen.CreateCACert(now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := ParseCA(map[string][]byte{caFile: ca.CertPEM, caKeyFile: ca.KeyPEM})
	if err != nil {
		t.Fatal(err)
	}
	// What it signs chains to the CA, for every name.
	cert, _, err := gen.CreateCertPEM(parsed, now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if missing := missingDNSNames(cert, []string{"svc", "metrics.ns.svc"}); len(missing) > 0 {
		t.Errorf("the certificate lacks %v", missing)
	}
	block, _ := pem.Decode(cert)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "metrics.ns.svc", Roots: roots}); err != nil {
		t.Errorf("the certificate does not chain to the CA: %v", err)
	}

	if _, err := ParseCA(map[string][]byte{caFile: ca.CertPEM}); err == nil {
		t.Error("a Secret without the CA key was parsed")
	}
}
