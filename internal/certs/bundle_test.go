package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"
)

func testCA(t *testing.T, name string, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: notAfter.Add(-24 * time.Hour), NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func names(bundle []byte) []string {
	var out []string
	for _, c := range parseCerts(bundle) {
		out = append(out, c.Subject.CommonName)
	}
	return out
}

func TestMergeCABundle(t *testing.T) {
	now := time.Now()
	newCA := testCA(t, "new", now.Add(10*time.Hour))
	oldCA := testCA(t, "old", now.Add(time.Hour))
	olderCA := testCA(t, "older", now.Add(2*time.Hour))
	expired := testCA(t, "expired", now.Add(-time.Minute))

	cases := map[string]struct {
		installed []byte
		want      []string
	}{
		"nothing installed yet":         {nil, []string{"new"}},
		"already current":               {newCA, []string{"new"}},
		"rotation keeps the old CA":     {oldCA, []string{"new", "old"}},
		"after rotation, stable":        {append(append([]byte{}, newCA...), oldCA...), []string{"new", "old"}},
		"at most one previous CA":       {append(append([]byte{}, oldCA...), olderCA...), []string{"new", "old"}},
		"an expired CA is dropped":      {expired, []string{"new"}},
		"expired skipped, next kept":    {append(append([]byte{}, expired...), oldCA...), []string{"new", "old"}},
		"garbage in the bundle ignored": {[]byte("not a pem"), []string{"new"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := names(mergeCABundle(newCA, tc.installed, now))
			if len(got) != len(tc.want) {
				t.Fatalf("bundle holds %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("bundle holds %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestDesiredBundlesIsStableOnceInjected(t *testing.T) {
	now := time.Now()
	newCA := testCA(t, "new", now.Add(10*time.Hour))
	oldCA := testCA(t, "old", now.Add(time.Hour))
	want, changed := desiredBundles(newCA, [][]byte{oldCA, oldCA}, now)
	if !changed {
		t.Fatal("a rotated CA must change the bundles")
	}
	if _, changed := desiredBundles(newCA, [][]byte{want, want}, now); changed {
		t.Fatal("injecting the same bundle again must be a no-op")
	}
	if _, changed := desiredBundles(newCA, [][]byte{want, nil}, now); !changed {
		t.Fatal("a webhook without the bundle must be updated")
	}
}
