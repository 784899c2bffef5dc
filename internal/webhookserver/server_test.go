package webhookserver

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestLimitBody: a body announced or found larger than the limit is
// answered 413 without reaching the handler; a smaller one reaches it
// whole, with its exact length.
func TestLimitBody(t *testing.T) {
	const limit = 1000
	var got string
	h := LimitBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.ContentLength != int64(len(b)) {
			t.Errorf("Content-Length %d for a body of %d bytes", r.ContentLength, len(b))
		}
		got = string(b)
	}), limit)
	for name, tc := range map[string]struct {
		body    string
		chunked bool
		want    int
	}{
		"small":             {body: "hello", want: http.StatusOK},
		"exactly the limit": {body: strings.Repeat("x", limit), want: http.StatusOK},
		"announced larger":  {body: strings.Repeat("x", limit+1), want: http.StatusRequestEntityTooLarge},
		"chunked larger":    {body: strings.Repeat("x", 3*limit), chunked: true, want: http.StatusRequestEntityTooLarge},
		"chunked small":     {body: "hello", chunked: true, want: http.StatusOK},
	} {
		t.Run(name, func(t *testing.T) {
			got = ""
			req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tc.body))
			if tc.chunked {
				req.ContentLength = -1
				req.Body = io.NopCloser(strings.NewReader(tc.body))
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d", rec.Code, tc.want)
			}
			if tc.want == http.StatusOK && got != tc.body {
				t.Errorf("handler read %d bytes, want %d", len(got), len(tc.body))
			}
			if tc.want != http.StatusOK && got != "" {
				t.Errorf("the handler saw a refused body")
			}
		})
	}
}

// TestTLSConfig: the flags' accepted values and the refusals, each naming
// its flag.
func TestTLSConfig(t *testing.T) {
	for name, tc := range map[string]struct {
		version string
		suites  []string
		wantErr string // flag named in the error; "" for none
		wantMin uint16
	}{
		"default":             {version: "VersionTLS12", wantMin: tls.VersionTLS12},
		"tls 1.3":             {version: "VersionTLS13", wantMin: tls.VersionTLS13},
		"suites":              {version: "VersionTLS12", suites: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, wantMin: tls.VersionTLS12},
		"tls 1.1":             {version: "VersionTLS11", wantErr: "--tls-min-version"},
		"garbage version":     {version: "1.2", wantErr: "--tls-min-version"},
		"insecure suite":      {version: "VersionTLS12", suites: []string{"TLS_RSA_WITH_RC4_128_SHA"}, wantErr: "--tls-cipher-suites"},
		"unknown suite":       {version: "VersionTLS12", suites: []string{"TLS_FAST"}, wantErr: "--tls-cipher-suites"},
		"suites with tls 1.3": {version: "VersionTLS13", suites: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, wantErr: "--tls-cipher-suites"},
	} {
		t.Run(name, func(t *testing.T) {
			opt, err := TLSConfig(tc.version, tc.suites)
			if tc.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr+":") {
					t.Fatalf("error %v, want one naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var c tls.Config
			opt(&c)
			if c.MinVersion != tc.wantMin || len(c.CipherSuites) != len(tc.suites) {
				t.Errorf("MinVersion %x, suites %v", c.MinVersion, c.CipherSuites)
			}
		})
	}
}
