package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
		all := c.refusals()
		if len(all) <= c.mark {
			return
		}
		added := all[c.mark:]
		if c.authorizer != nil {
			added = c.deniedNow(t, added)
		}
		if len(added) > 0 {
			t.Errorf("the API server refused %d request(s) of the manager under its own identity (add the permission with a +kubebuilder:rbac marker); the first:\n%s",
				len(added), strings.Join(added[:min(len(added), 5)], "\n"))
		}
	})
	return c
}

// RefusalCheck is the check FailOnRefusals registered.
type RefusalCheck struct {
	refusals   func() []string
	mark       int
	authorizer client.Client
}

// ForgiveWarmUp makes the check ask the API server's authorizer, once the
// test ends, about each authorization refusal: one it now grants is
// forgiven. It is for a test that restarts kube-apiserver, whose RBAC
// authorizer answers 403 until its informers have synced, however complete
// the roles are; the manager's reconciler may log such a refusal seconds
// later (when its batch of requests ends), so no moment separates the
// warm-up's refusals from the rest. A permission the roles really lack is
// still denied, and still fails the test, as does a refusal by admission.
func (c *RefusalCheck) ForgiveWarmUp(authorizer client.Client) { c.authorizer = authorizer }

// deniedNow keeps the refusals whose permission the authorizer denies
// today, or which are no authorization refusal it can be asked about.
func (c *RefusalCheck) deniedNow(t testing.TB, lines []string) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for _, l := range lines {
		attrs, user, ok := RefusedPermission(l)
		if !ok {
			out = append(out, l)
			continue
		}
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: serviceAccountGroups(user), ResourceAttributes: attrs,
		}}
		if err := c.authorizer.Create(ctx, review); err != nil {
			t.Logf("asking the authorizer about %q: %v", l, err)
			out = append(out, l)
			continue
		}
		if !review.Status.Allowed {
			out = append(out, l)
		}
	}
	return out
}

// refusedPermission matches the authorizer's words in a 403: User "u"
// cannot verb resource "r[/sub]" in API group "g" [in the namespace "n"].
var refusedPermission = regexp.MustCompile(`User \\?"([^"\\]+)\\?" cannot (\w+) resource \\?"([^"\\]+)\\?" in API group \\?"([^"\\]*)\\?"(?: in the namespace \\?"([^"\\]+)\\?")?`)

// RefusedPermission reads the user and the permission an authorization
// refusal names (in a log line, where its quotes may be escaped).
func RefusedPermission(line string) (*authorizationv1.ResourceAttributes, string, bool) {
	m := refusedPermission.FindStringSubmatch(line)
	if m == nil {
		return nil, "", false
	}
	resource, sub, _ := strings.Cut(m[3], "/")
	return &authorizationv1.ResourceAttributes{
		Verb: m[2], Resource: resource, Subresource: sub, Group: m[4], Namespace: m[5],
	}, m[1], true
}

// serviceAccountGroups are the groups the API server puts a
// ServiceAccount's requests in.
func serviceAccountGroups(user string) []string {
	parts := strings.Split(user, ":")
	if len(parts) != 4 || parts[0] != "system" || parts[1] != "serviceaccount" {
		return []string{"system:authenticated"}
	}
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + parts[2], "system:authenticated"}
}
