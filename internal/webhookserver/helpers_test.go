package webhookserver

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// startEchoServer starts a server on a free loopback port with a fresh
// loopback certificate and one handler, /echo, that answers with the body
// it read. It is stopped when t ends.
func startEchoServer(t *testing.T) (*Server, int) {
	t.Helper()
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
	return s, port
}
