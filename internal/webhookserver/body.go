package webhookserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// MaxBodyBytes is the largest request body the webhook server reads: 4 MiB.
// The API server refuses a write whose body exceeds 3 MiB, and etcd stores
// at most 1.5 MiB per object by default, so an AdmissionReview about an
// object that can be stored carries at most 3 MiB of objects (a create's
// object, or an update's object and old object of 1.5 MiB each); 1 MiB more
// holds the review's envelope (user info, options). A larger body is not a
// review the API server would send about an object it could store.
const MaxBodyBytes = 4 << 20

// initialBodyBuffer is the most a body buffer starts at whatever
// Content-Length says (a large pod's JSON): a caller that announces
// megabytes and sends them slowly holds only what it has sent.
const initialBodyBuffer = 64 << 10

// LimitBody reads the request body (up to limit bytes) before next sees
// the request, and answers 413 Request Entity Too Large to a body
// announced or found to be larger, without reading further. next gets the
// body in memory and its exact Content-Length.
func LimitBody(next http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		if r.ContentLength > limit {
			tooLarge(w, limit)
			return
		}
		body, err := readBounded(r.Body, r.ContentLength, limit)
		_ = r.Body.Close()
		switch {
		case errors.Is(err, errTooLarge):
			tooLarge(w, limit)
			return
		case err != nil:
			w.Header().Set("Connection", "close")
			http.Error(w, "reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		next.ServeHTTP(w, r)
	})
}

var errTooLarge = errors.New("request body too large")

// tooLarge answers 413 and closes the connection, so that the rest of the
// body is never read.
func tooLarge(w http.ResponseWriter, limit int64) {
	w.Header().Set("Connection", "close")
	http.Error(w, fmt.Sprintf("request body too large: the limit is %d bytes", limit), http.StatusRequestEntityTooLarge)
}

// readBounded reads r to its end, or fails with errTooLarge once it has
// more than limit bytes. The buffer starts at the announced length, at most
// initialBodyBuffer, and grows as bytes arrive.
func readBounded(r io.Reader, announced, limit int64) ([]byte, error) {
	size := int64(bytes.MinRead)
	if announced > size {
		size = min(announced, initialBodyBuffer)
	}
	buf := make([]byte, 0, size+1) // +1: reading the announced length then EOF needs no growth
	lr := &io.LimitedReader{R: r, N: limit + 1}
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := lr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, errTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
