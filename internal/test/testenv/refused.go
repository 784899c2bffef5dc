package testenv

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

// refusedRequests records the manager's API requests that the API server
// answered with 403 Forbidden.
type refusedRequests struct {
	mu       sync.Mutex
	lines    []string
	reported int // lines before this index were already reported by a test
	// expected are the path prefixes of requests a test expects refused.
	expected []string
}

// expect stops recording refusals of requests whose path starts with
// prefix.
func (r *refusedRequests) expect(prefix string) {
	r.mu.Lock()
	r.expected = append(r.expected, prefix)
	r.mu.Unlock()
}

func (r *refusedRequests) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusForbidden {
			return resp, err
		}
		// The body says which permission is missing; read it and hand the
		// caller an identical copy.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		line := fmt.Sprintf("%s %s: %s", req.Method, req.URL.RequestURI(), printable(body))
		if !localcluster.IsForbidden(line) {
			return resp, nil
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, prefix := range r.expected {
			if strings.HasPrefix(req.URL.Path, prefix) {
				return resp, nil
			}
		}
		r.lines = append(r.lines, line)
		return resp, nil
	})
}

func (r *refusedRequests) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines)
}

// since returns the refusals recorded from index mark on that no test has
// reported yet.
func (r *refusedRequests) since(mark int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	from := max(mark, r.reported)
	if from >= len(r.lines) {
		return nil
	}
	return append([]string(nil), r.lines[from:]...)
}

// report marks every refusal recorded so far as reported.
func (r *refusedRequests) report() {
	r.mu.Lock()
	r.reported = len(r.lines)
	r.mu.Unlock()
}

// printable keeps the readable text of a JSON or protobuf Status body.
func printable(body []byte) string {
	fields := strings.FieldsFunc(string(body), func(r rune) bool { return !unicode.IsPrint(r) })
	return strings.Join(fields, " ")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// FailOnRefusals fails t if refusals (for example
// localcluster.Cluster.ManagerRefusals) returns more lines when t ends than
// when FailOnRefusals was called: a manager under its own identity was
// refused a request while t ran.
func FailOnRefusals(t testing.TB, refusals func() []string) *RefusalCheck {
	t.Helper()
	c := &RefusalCheck{refusals: refusals, mark: len(refusals())}
	t.Cleanup(func() {
		if all := c.refusals(); len(all) > c.mark {
			added := all[c.mark:]
			t.Errorf("the API server refused %d request(s) of the manager under its own identity (add the permission with a +kubebuilder:rbac marker); the first:\n%s",
				len(added), strings.Join(added[:min(len(added), 5)], "\n"))
		}
	})
	return c
}

// RefusalCheck is the check FailOnRefusals registered.
type RefusalCheck struct {
	refusals func() []string
	mark     int
}

// Excuse forgives the refusals recorded so far. It is for one moment only:
// right after kube-apiserver itself restarted, whose authorizer answers 403
// until its informers have synced (before /readyz says ok), however
// complete the roles are.
func (c *RefusalCheck) Excuse() { c.mark = len(c.refusals()) }
