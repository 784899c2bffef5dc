package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/deckhand-dev/deckhand/internal/certs"
)

// CertPair is a PEM-encoded serving certificate, its key and the CA that signed it.
type CertPair struct {
	CertPEM []byte
	KeyPEM  []byte
	CAPEM   []byte
}

// WriteFiles writes tls.crt, tls.key and ca.crt into dir, the layout
// controller-runtime's webhook server and the API server flags expect, with
// the writer the manager keeps its own certificate directory with.
func (p CertPair) WriteFiles(dir string) error {
	_, err := certs.WriteFiles(dir, map[string][]byte{
		corev1.TLSCertKey:       p.CertPEM,
		corev1.TLSPrivateKeyKey: p.KeyPEM,
		"ca.crt":                p.CAPEM,
	})
	return err
}

// localCertValidity is how long the certificates of a local cluster's own
// components stay valid: longer than any cluster lives.
const localCertValidity = 365 * 24 * time.Hour

// NewLoopbackServingCert creates a throw-away CA and a serving certificate
// for 127.0.0.1 and localhost signed by it, valid for validity.
func NewLoopbackServingCert(validity time.Duration) (CertPair, error) {
	return newServingCert("deckhand-local-ca", "127.0.0.1", []string{"localhost"}, validity)
}

// newServingCert creates a throw-away CA called caName and a serving
// certificate for 127.0.0.1 and dnsNames signed by it, both valid for validity.
func newServingCert(caName, commonName string, dnsNames []string, validity time.Duration) (CertPair, error) {
	ca, caKey, err := newCA(caName, validity)
	if err != nil {
		return CertPair{}, err
	}
	tmpl := certTemplate(2, commonName, x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment, validity)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	tmpl.DNSNames = dnsNames
	key, cert, err := issue(tmpl, ca, caKey)
	if err != nil {
		return CertPair{}, err
	}
	keyPEM, err := keyToPEM(key)
	if err != nil {
		return CertPair{}, err
	}
	return CertPair{CertPEM: certToPEM(cert), KeyPEM: keyPEM, CAPEM: certToPEM(ca)}, nil
}

// newCA creates a throw-away self-signed CA.
func newCA(commonName string, validity time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	tmpl := certTemplate(1, commonName, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature, validity)
	tmpl.BasicConstraintsValid, tmpl.IsCA = true, true
	key, cert, err := issue(tmpl, nil, nil)
	return cert, key, err
}

// certTemplate is a certificate valid for validity from a minute ago.
func certTemplate(serial int64, commonName string, usage x509.KeyUsage, validity time.Duration) *x509.Certificate {
	now := time.Now().Add(-time.Minute)
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    now,
		NotAfter:     now.Add(validity),
		KeyUsage:     usage,
	}
}

func certToPEM(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

func keyToPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

// issue generates a P-256 key and a certificate of tmpl for it, signed by
// parent's key, or by the new key itself when parent is nil (a CA).
func issue(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return key, cert, err
}

// writeServiceAccountKey writes the RSA key pair the API server signs
// service-account tokens with and kube-controller-manager signs legacy tokens with.
func writeServiceAccountKey(dir string) (keyFile, pubFile string, err error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", "", err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return "", "", err
	}
	keyFile = filepath.Join(dir, "sa.key")
	pubFile = filepath.Join(dir, "sa.pub")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return "", "", fmt.Errorf("writing service-account key: %w", err)
	}
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		return "", "", fmt.Errorf("writing service-account public key: %w", err)
	}
	return keyFile, pubFile, nil
}
