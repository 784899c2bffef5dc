package webhookserver

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestDrainClosesConnections: connections are kept alive until Drain;
// afterwards every answer closes its connection, and the next request
// comes on a new one.
func TestDrainClosesConnections(t *testing.T) {
	pair, err := localcluster.NewLoopbackServingCert(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := pair.WriteFiles(dir); err != nil {
		t.Fatal(err)
	}
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	s := New(webhook.Options{Host: "127.0.0.1", Port: port, CertDir: dir})
	s.Register("/echo", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(w, r.Body)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	testutil.Eventually(t, 10*time.Second, func(context.Context) (bool, error) {
		return s.StartedChecker()(nil) == nil, nil
	}, "the server reports started")

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test server's own certificate
	}}
	url := "https://127.0.0.1:" + strconv.Itoa(port) + "/echo"
	// post reports whether the request reused a connection and whether
	// the answer closed it.
	post := func() (reused, closed bool) {
		t.Helper()
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused },
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{}`))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return reused, resp.Close
	}
	if _, closed := post(); closed {
		t.Fatal("an answer closed its connection before the drain")
	}
	if reused, _ := post(); !reused {
		t.Fatal("a connection was not kept alive before the drain")
	}
	s.Drain()
	if reused, closed := post(); !reused || !closed {
		t.Errorf("first request of the drain: reused %t (want true), closed %t (want true)", reused, closed)
	}
	if reused, closed := post(); reused || !closed {
		t.Errorf("next request of the drain: reused %t (want false: a new connection), closed %t (want true)", reused, closed)
	}
}
