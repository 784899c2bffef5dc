// Package webhookserver serves Deckhand's admission webhooks to anything
// that reaches the port: controller-runtime's webhook server (its handler
// registration and request metrics) with a bounded body, bounded time per
// connection and a TLS floor the operator chooses.
package webhookserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// What a connection may take. The API server sends a review's headers and
// body in one go right after the handshake and waits at most 30 seconds
// (the largest timeoutSeconds a webhook may have) for the answer; a client
// slower than these is not the API server.
const (
	// ReadHeaderTimeout bounds the TLS handshake and the request headers
	// (net/http applies the smallest of its timeouts to the handshake).
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds the whole request, body included.
	ReadTimeout = 30 * time.Second
	// WriteTimeout bounds the time from the end of the headers to the end
	// of the answer: the longest webhook timeout, and a margin.
	WriteTimeout = 35 * time.Second
	// IdleTimeout is how long a kept-alive connection may wait for its next
	// request (controller-runtime's, and the API server's idle transport
	// timeout).
	IdleTimeout = 90 * time.Second
	// MaxHeaderBytes bounds the request line and headers; an
	// AdmissionReview request carries a few hundred bytes of them.
	MaxHeaderBytes = 64 << 10
)

var log = logf.Log.WithName("webhook-server")

// Server is a webhook.Server: handlers are registered through
// controller-runtime's (which counts their requests and latency), and
// served by an http.Server of its own that caps bodies and bounds time.
type Server struct {
	webhook.Server
	opts     webhook.Options
	started  atomic.Bool
	draining atomic.Bool
}

var _ webhook.Server = &Server{}

// New returns a Server listening on o.Host:o.Port with the certificate in
// o.CertDir (reloaded when it changes) and o.TLSOpts applied.
func New(o webhook.Options) *Server {
	if o.WebhookMux == nil {
		o.WebhookMux = http.NewServeMux()
	}
	if o.Port == 0 {
		o.Port = webhook.DefaultPort
	}
	if o.CertName == "" {
		o.CertName = "tls.crt"
	}
	if o.KeyName == "" {
		o.KeyName = "tls.key"
	}
	return &Server{Server: webhook.NewServer(o), opts: o}
}

// Start serves until ctx ends, then shuts down, letting requests in flight
// finish for up to a minute. It offers HTTP/2 and HTTP/1.1 unless a TLS
// option sets NextProtos: over HTTP/2 the shutdown tells the client first
// (GOAWAY), and the client sends the calls the server did not take on a new
// connection; an HTTP/1.1 connection kept alive is closed under the feet of
// a call that may be on its way.
func (s *Server) Start(ctx context.Context) error {
	cfg := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	for _, op := range s.opts.TLSOpts {
		op(cfg)
	}
	if cfg.GetCertificate == nil {
		w, err := certwatcher.New(filepath.Join(s.opts.CertDir, s.opts.CertName), filepath.Join(s.opts.CertDir, s.opts.KeyName))
		if err != nil {
			return err
		}
		cfg.GetCertificate = w.GetCertificate
		go func() {
			if err := w.Start(ctx); err != nil {
				log.Error(err, "certificate watcher error")
			}
		}()
	}
	ln, err := tls.Listen("tcp", net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port)), cfg)
	if err != nil {
		return err
	}
	// Calls still in flight when ctx ends are answered in full: their
	// context ends only once the shutdown has given up on them.
	calls, endCalls := context.WithCancel(context.WithoutCancel(ctx))
	defer endCalls()
	srv := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return calls },
		Handler:           s.closeWhenDraining(LimitBody(s.opts.WebhookMux, MaxBodyBytes)),
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		shutdown(srv)
	}()
	log.Info("serving webhooks", "host", s.opts.Host, "port", s.opts.Port, "minTLSVersion", tls.VersionName(cfg.MinVersion))
	s.started.Store(true)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	<-done
	return nil
}

// goAwayRepeat is how often a shutdown sends GOAWAY again, to the HTTP/2
// connections whose TLS handshake ended after it began.
const goAwayRepeat = 100 * time.Millisecond

// shutdown stops srv, letting calls in flight finish for up to a minute.
// http.Server.Shutdown sends GOAWAY to the HTTP/2 connections it knows of
// when it begins; a connection accepted before that whose handshake ends
// after joins HTTP/2 too late to get it, would be waited for until the
// minute is over, and then closed with no word to the client. Each further
// call of Shutdown sends GOAWAY to every HTTP/2 connection again, so it is
// called until the first returns.
func shutdown(srv *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- srv.Shutdown(ctx) }()
	again, stop := context.WithCancel(context.Background())
	stop() // the repeats only send GOAWAY and close idle connections
	tick := time.NewTicker(goAwayRepeat)
	defer tick.Stop()
	for {
		select {
		case err := <-result:
			if err != nil {
				log.Error(err, "shutting down the webhook server")
			}
			return
		case <-tick.C:
			_ = srv.Shutdown(again)
		}
	}
}

// Drain makes every answer from now on close its connection (over HTTP/2:
// send GOAWAY, after which the client opens a new connection for its next
// call). A connection kept alive would carry the API server's next calls to
// this replica even after the Service has dropped it, up to the moment it
// stops; a new connection goes through the Service to a replica that stays.
func (s *Server) Drain() { s.draining.Store(true) }

func (s *Server) closeWhenDraining(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.draining.Load() {
			// net/http closes an HTTP/1.1 connection after this answer
			// (over HTTP/2 it sends GOAWAY instead).
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// StartedChecker is healthy once the server accepts TLS connections.
func (s *Server) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("webhook server has not been started yet")
		}
		d := &net.Dialer{Timeout: 10 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port)),
			&tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a liveness probe of our own listener
		if err != nil {
			return fmt.Errorf("webhook server is not reachable: %w", err)
		}
		return conn.Close()
	}
}
