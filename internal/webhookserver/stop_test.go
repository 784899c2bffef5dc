package webhookserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestStopLosesNoCall: a replica that stops while calls reach it fails
// none of them over HTTP/2. The client is the API server's (a Go transport
// that offers HTTP/2, POSTs with a rewindable body and no retry of its
// own); its new connections go to the stopping replica until that one
// leaves the endpoint list, then to the one that stays. Each round opens
// connections to the stopping replica with a burst of calls, drains it,
// unlists it, and sends the next burst at the very moment it stops: the
// worst case, every call on a connection the stop is closing. Over HTTP/2
// the server sends GOAWAY before it closes, and the client resends the
// calls the server did not take on a new connection; over HTTP/1.1 the
// server closes its idle kept-alive connections with no word to the
// client, and a call sent on one at that instant fails (set http1Only to
// see it).
func TestStopLosesNoCall(t *testing.T) {
	const http1Only = false
	const rounds, burst = 20, 16
	var sent, failed atomic.Int64
	var firstErr atomic.Value
	for round := range rounds {
		stopping, stays := startEcho(t), startEcho(t)
		var listed atomic.Bool
		listed.Store(true)
		dialer := &net.Dialer{Timeout: 5 * time.Second}
		conns := &connSet{}
		transport := &http.Transport{
			TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test server's own certificate
			ForceAttemptHTTP2:   !http1Only,
			MaxIdleConnsPerHost: burst,
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				port := stays.port
				if listed.Load() {
					port = stopping.port
				}
				return conns.dial(ctx, dialer, network, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
			},
		}
		client := &http.Client{Timeout: 10 * time.Second, Transport: transport}
		call := func(i int) {
			body := fmt.Appendf(nil, `{"round":%d,"call":%d}`, round, i)
			sent.Add(1)
			resp, err := client.Post("https://deckhand-webhook/echo", "application/json", bytes.NewReader(body))
			if err == nil {
				got, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case rerr != nil:
					err = rerr
				case resp.StatusCode != http.StatusOK:
					err = fmt.Errorf("answered %s: %s", resp.Status, got)
				case !bytes.Equal(got, body):
					err = fmt.Errorf("answered %q to %q", got, body)
				}
			}
			if err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err)
			}
		}
		fire := func(start <-chan struct{}) *sync.WaitGroup {
			var wg sync.WaitGroup
			for i := range burst {
				wg.Go(func() { <-start; call(i) })
			}
			return &wg
		}
		now := make(chan struct{})
		close(now)
		fire(now).Wait()
		stopping.Drain()
		listed.Store(false)
		start := make(chan struct{})
		wg := fire(start)
		// Vary which of the two comes first by a little, round by round.
		go func() { time.Sleep(time.Duration(round%5) * 200 * time.Microsecond); close(start) }()
		stopping.stop()
		wg.Wait()
		// A dial the transport started for a call that another connection
		// then took may still be under way; close every connection the
		// client has, so that the server that stays stops at once.
		conns.closeAll(t)
		stays.stop()
	}
	t.Logf("%d stops, %d calls, %d failed", rounds, sent.Load(), failed.Load())
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d calls failed across %d stops; first: %v", n, sent.Load(), rounds, firstErr.Load())
	}
}

// connSet is the client's connections, for closing them all at the end of
// a round.
type connSet struct {
	mu      sync.Mutex
	dialing int
	conns   []net.Conn
}

func (c *connSet) dial(ctx context.Context, d *net.Dialer, network, addr string) (net.Conn, error) {
	c.mu.Lock()
	c.dialing++
	c.mu.Unlock()
	conn, err := d.DialContext(ctx, network, addr)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dialing--
	if conn != nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

// closeAll waits for the dials under way, then closes every connection.
func (c *connSet) closeAll(t *testing.T) {
	testutil.Eventually(t, 10*time.Second, func(context.Context) (bool, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.dialing == 0, nil
	}, "the client's dials end")
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// TestStopSendsGOAWAYToLateConnections: a connection accepted before the
// stop whose TLS handshake ends after it (its listener already closed)
// still gets GOAWAY, and the stop does not wait for it beyond the GOAWAY's
// grace. Without it, the server waits for the connection until its
// shutdown deadline and then closes it under the client's feet.
func TestStopSendsGOAWAYToLateConnections(t *testing.T) {
	e := startEcho(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(e.port))
	raw, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	stopped := make(chan time.Time, 1)
	go func() { e.stop(); stopped <- time.Now() }()
	testutil.Eventually(t, 10*time.Second, func(context.Context) (bool, error) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil, nil
	}, "the server stops listening")

	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // a test server's own certificate
	if err := conn.Handshake(); err != nil {
		t.Fatalf("the handshake begun before the stop: %v", err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	// The client preface and an empty SETTINGS frame.
	if _, err := conn.Write(append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)); err != nil {
		t.Fatal(err)
	}
	const frameGoAway = 7
	began := time.Now()
	_ = conn.SetReadDeadline(began.Add(10 * time.Second))
	var frames []byte
	for {
		var header [9]byte
		if _, err := io.ReadFull(conn, header[:]); err != nil {
			t.Fatalf("no GOAWAY within %s of the handshake (frames seen: %v): %v", time.Since(began).Round(time.Millisecond), frames, err)
		}
		frames = append(frames, header[3])
		length := int(header[0])<<16 | int(header[1])<<8 | int(header[2])
		if _, err := io.CopyN(io.Discard, conn, int64(length)); err != nil {
			t.Fatal(err)
		}
		if header[3] == frameGoAway {
			break
		}
	}
	goAway := time.Since(began)
	select {
	case at := <-stopped:
		t.Logf("GOAWAY %s after the handshake; stopped %s after it", goAway.Round(time.Millisecond), at.Sub(began).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatalf("the server had not stopped 10s after its GOAWAY")
	}
}
