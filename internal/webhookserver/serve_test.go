package webhookserver

import (
	"crypto/tls"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestServerServes: the server serves registered handlers over HTTP/1.1
// and HTTP/2 with the certificate of its directory, caps bodies on both,
// reports started, and keeps controller-runtime's request metrics.
func TestServerServes(t *testing.T) {
	_, port := startEchoServer(t)

	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/echo"
	for _, h2 := range []bool{false, true} {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test server's own certificate
			ForceAttemptHTTP2: h2,
		}}
		resp, err := client.Post(url, "application/json", strings.NewReader(`{"ok":true}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if wantMajor := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != wantMajor || string(body) != `{"ok":true}` {
			t.Errorf("HTTP/2 %v: %s %q", h2, resp.Proto, body)
		}
		resp, err = client.Post(url, "application/json", strings.NewReader(strings.Repeat("x", MaxBodyBytes+1)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("HTTP/2 %v: an oversized body was answered %d", h2, resp.StatusCode)
		}
	}

	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range families {
		if f.GetName() == "controller_runtime_webhook_requests_total" {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					found = found || (l.GetName() == "webhook" && l.GetValue() == "/echo")
				}
			}
		}
	}
	if !found {
		t.Errorf("no controller_runtime_webhook_requests_total for /echo")
	}
}
