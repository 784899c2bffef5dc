package webhookserver

import (
	"crypto/tls"
	"fmt"
	"sort"
	"strings"
)

// tlsVersions are the values --tls-min-version accepts, named as the
// Kubernetes components name them. Versions below TLS 1.2 are not offered:
// they are deprecated (RFC 8996) and no supported API server needs them.
var tlsVersions = map[string]uint16{
	"VersionTLS12": tls.VersionTLS12,
	"VersionTLS13": tls.VersionTLS13,
}

// TLSConfig returns the option that applies --tls-min-version and
// --tls-cipher-suites to a server's tls.Config, or an error naming the flag
// and the value it refuses. Cipher suites are Go's names (as in
// kube-apiserver's flag of the same name), secure ones only; empty keeps
// Go's defaults. TLS 1.3 suites are not configurable, so a list together
// with VersionTLS13 is refused rather than silently ignored.
func TLSConfig(minVersion string, cipherSuites []string) (func(*tls.Config), error) {
	v, ok := tlsVersions[minVersion]
	if !ok {
		return nil, fmt.Errorf("--tls-min-version: %q is not supported; use one of %s", minVersion, strings.Join(sortedKeys(tlsVersions), ", "))
	}
	secure := map[string]uint16{}
	for _, s := range tls.CipherSuites() {
		secure[s.Name] = s.ID
	}
	var ids []uint16
	for _, name := range cipherSuites {
		id, ok := secure[name]
		if !ok {
			return nil, fmt.Errorf("--tls-cipher-suites: %q is not a supported cipher suite (unknown or insecure); use any of %s", name, strings.Join(sortedKeys(secure), ", "))
		}
		ids = append(ids, id)
	}
	if len(ids) > 0 && v == tls.VersionTLS13 {
		return nil, fmt.Errorf("--tls-cipher-suites: has no effect with --tls-min-version=VersionTLS13 (TLS 1.3 cipher suites are not configurable)")
	}
	return func(c *tls.Config) {
		c.MinVersion = v
		if len(ids) > 0 {
			c.CipherSuites = ids
		}
	}, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
