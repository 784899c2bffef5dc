package certs

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"time"
)

// mergeCABundle returns the CA bundle to inject: the current CA first, then
// at most one earlier CA from the bundle already installed, as long as it
// has not expired.
//
// Keeping the previous CA is what makes a CA rotation safe. The API server
// verifies the webhook server against the bundle, and the replicas switch to
// a certificate signed by the new CA one by one, moments apart: with both
// CAs trusted, neither the old nor the new serving certificate is refused
// while that happens. (cert-controller's own injection writes only the new
// CA, which leaves a short window of "certificate signed by unknown
// authority" errors on every CA rotation.)
func mergeCABundle(current, installed []byte, now time.Time) []byte {
	out := bytes.TrimSpace(current)
	out = append(out[:len(out):len(out)], '\n')
	currentCerts := parseCerts(current)
	for _, c := range parseCerts(installed) {
		if now.After(c.NotAfter) || containsCert(currentCerts, c) {
			continue
		}
		return append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return out
}

func parseCerts(data []byte) []*x509.Certificate {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			certs = append(certs, c)
		}
	}
}

func containsCert(certs []*x509.Certificate, c *x509.Certificate) bool {
	for _, have := range certs {
		if have.Equal(c) {
			return true
		}
	}
	return false
}
