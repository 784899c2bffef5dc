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
)

// TestDrainClosesConnections: connections are kept alive until Drain;
// afterwards every answer closes its connection, and the next request
// comes on a new one.
func TestDrainClosesConnections(t *testing.T) {
	s, port := startEchoServer(t)

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
