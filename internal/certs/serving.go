package certs

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// FileCertificate serves the certificate pair of a directory (tls.crt,
// tls.key) as a tls.Config.GetCertificate, reloaded whenever the files
// change. The metrics server serves the webhook's serving certificate this
// way, so that a scraper verifies it against the CA in the certificate
// Secret (ca.crt) instead of skipping verification.
//
// Note: in self mode the files appear only once the rotator has issued the
// certificate, after the metrics server started; until then a handshake
// fails instead of the manager (controller-runtime's own file watcher must
// find the files at start, or serves a throw-away self-signed certificate
// for good).
type FileCertificate struct {
	dir string

	mu    sync.Mutex
	stamp [2]fileStamp
	cert  *tls.Certificate
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// NewFileCertificate returns a FileCertificate reading dir.
func NewFileCertificate(dir string) *FileCertificate {
	return &FileCertificate{dir: dir}
}

// GetCertificate returns the directory's current pair. While the files are
// being replaced (the key is written before the certificate) the pair may
// not match: the previous pair is served until it does.
func (f *FileCertificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	certPath, keyPath := filepath.Join(f.dir, certFile), filepath.Join(f.dir, keyFile)
	var stamp [2]fileStamp
	for i, p := range []string{certPath, keyPath} {
		st, err := os.Stat(p)
		if err != nil {
			return f.previous(fmt.Errorf("serving certificate not available yet: %w", err))
		}
		stamp[i] = fileStamp{mod: st.ModTime(), size: st.Size()}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cert != nil && stamp == f.stamp {
		return f.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		if f.cert != nil {
			return f.cert, nil
		}
		return nil, fmt.Errorf("loading the serving certificate: %w", err)
	}
	f.cert, f.stamp = &cert, stamp
	return f.cert, nil
}

// previous returns the last pair loaded, or err when there is none.
func (f *FileCertificate) previous(err error) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cert != nil {
		return f.cert, nil
	}
	return nil, err
}
