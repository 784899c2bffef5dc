package webhookserver

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDrainClosesConnections: connections are kept alive until Drain;
// afterwards every answer closes its connection (HTTP/1.1: Connection:
// close; HTTP/2: GOAWAY), and the next request comes on a new one.
func TestDrainClosesConnections(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			s, port := startEchoServer(t)
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
				TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test server's own certificate
				ForceAttemptHTTP2: h2,
			}}
			url := "https://127.0.0.1:" + strconv.Itoa(port) + "/echo"
			// post returns the local address of the connection the request
			// was last sent on and the protocol of the answer.
			post := func() (conn net.Addr, proto int) {
				t.Helper()
				ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
					GotConn: func(i httptrace.GotConnInfo) { conn = i.Conn.LocalAddr() },
				})
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{}`))
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				return conn, resp.ProtoMajor
			}
			first, proto := post()
			if want := map[bool]int{false: 1, true: 2}[h2]; proto != want {
				t.Fatalf("answered over HTTP/%d, want HTTP/%d", proto, want)
			}
			if again, _ := post(); again.String() != first.String() {
				t.Fatalf("a connection was not kept alive before the drain: %s, then %s", first, again)
			}
			s.Drain()
			if during, _ := post(); during.String() != first.String() {
				t.Errorf("the first request of the drain came on a new connection %s, want the kept-alive %s", during, first)
			}
			if next, _ := post(); next.String() == first.String() {
				t.Errorf("the request after the first of the drain came on the drained connection %s, want a new one", next)
			}
		})
	}
}
