package webhookserver

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// echoServer is a started Server with one handler, /echo.
type echoServer struct {
	*Server
	port int
	stop func() // ends Start (as the manager's context does) and waits for it
}

// startEchoServer starts a server on a free loopback port with a fresh
// loopback certificate and one handler, /echo, that answers with the body
// it read (503 if the call's context has ended). It is stopped when t
// ends, if not before.
func startEchoServer(t *testing.T) (*Server, int) {
	t.Helper()
	e := startEcho(t)
	return e.Server, e.port
}

func startEcho(t *testing.T) *echoServer {
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
		// A webhook handler that reads a cache or calls the API server
		// gives up on a call whose context has ended.
		if err := r.Context().Err(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = io.Copy(w, r.Body)
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	testutil.Eventually(t, 10*time.Second, func(context.Context) (bool, error) {
		return s.StartedChecker()(nil) == nil, nil
	}, "the server reports started")
	return &echoServer{Server: s, port: port, stop: stop}
}
