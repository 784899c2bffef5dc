package metricsauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The filter against an API server that knows the token "reader" (allowed
// to GET /metrics) and "nobody" (allowed nothing). The real API server's
// answers are tested end to end (test/e2e TestMetricsEndpointAuth); this
// table checks the status codes and that the caches spare repeat reviews.
func TestFilter(t *testing.T) {
	backoff = wait.Backoff{Steps: 1}
	for _, tc := range []struct {
		name         string
		header       string
		apiDown      bool
		want         int
		wantReviews  int // TokenReviews + SubjectAccessReviews for both requests
		secondCached bool
	}{
		{name: "no token", header: "", want: http.StatusUnauthorized},
		{name: "not a bearer token", header: "Basic cmVhZGVyOg==", want: http.StatusUnauthorized},
		{name: "unknown token", header: "Bearer bogus", want: http.StatusUnauthorized, wantReviews: 1},
		{name: "user without the role", header: "Bearer nobody", want: http.StatusForbidden, wantReviews: 2},
		{name: "reader", header: "Bearer reader", want: http.StatusOK, wantReviews: 2},
		{name: "scheme in lower case", header: "bearer reader", want: http.StatusOK, wantReviews: 2},
		{name: "API server unreachable", header: "Bearer reader", apiDown: true, want: http.StatusInternalServerError, wantReviews: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			reviews := 0
			cs.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				reviews++
				if tc.apiDown {
					return true, nil, errors.New("connection refused")
				}
				tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
				switch tr.Spec.Token {
				case "reader", "nobody":
					tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: tr.Spec.Token, Groups: []string{"g"}}}
				default:
					tr.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
				}
				return true, tr, nil
			})
			cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
				reviews++
				sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
				na := sar.Spec.NonResourceAttributes
				sar.Status.Allowed = sar.Spec.User == "reader" && na != nil && na.Path == "/metrics" && na.Verb == "get"
				return true, sar, nil
			})
			h, err := Filter(Reviewers{Tokens: cs.AuthenticationV1().TokenReviews(), Access: cs.AuthorizationV1().SubjectAccessReviews()})(
				logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				if tc.header != "" {
					req.Header.Set("Authorization", tc.header)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != tc.want {
					t.Errorf("request %d: %d %q, want %d", i+1, rec.Code, rec.Body.String(), tc.want)
				}
				if rec.Code == http.StatusOK && rec.Body.String() != "metrics" {
					t.Errorf("request %d served %q", i+1, rec.Body.String())
				}
			}
			// A failed review is not cached: each request asks again.
			if reviews != tc.wantReviews {
				t.Errorf("%d reviews for two requests, want %d", reviews, tc.wantReviews)
			}
		})
	}
}

func TestDecisionKeySeparatesUsers(t *testing.T) {
	a := &authenticationv1.UserInfo{Username: "a", Groups: []string{"g1", "g2"}}
	b := &authenticationv1.UserInfo{Username: "a", Groups: []string{"g1"}}
	c := &authenticationv1.UserInfo{Username: "a", Groups: []string{"g1", "g2"}, Extra: map[string]authenticationv1.ExtraValue{"scope": {"x"}}}
	keys := map[string]bool{}
	for _, k := range []string{decisionKey(a, "get", "/metrics"), decisionKey(b, "get", "/metrics"), decisionKey(c, "get", "/metrics"), decisionKey(a, "post", "/metrics"), decisionKey(a, "get", "/healthz")} {
		if keys[k] {
			t.Errorf("two different requests share the cache key %q", k)
		}
		keys[k] = true
	}
}

// A review the API server refuses (the manager lacks the RBAC) is not
// retried; one that failed in transit is, up to the backoff's steps.
func TestReviewRetriesOnlyTransientErrors(t *testing.T) {
	backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 3}
	for _, tc := range []struct {
		name  string
		err   error
		calls int
	}{
		{name: "forbidden", err: apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("no RBAC")), calls: 1},
		{name: "connection refused", err: errors.New("connection refused"), calls: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := review(context.Background(), func(context.Context) error { calls++; return tc.err })
			if err == nil || calls != tc.calls {
				t.Errorf("review: %v after %d calls, want an error after %d", err, calls, tc.calls)
			}
		})
	}
}
