// Package testutil holds the small helpers every test suite of Deckhand
// needs, whatever runs the manager (testenv's in-process manager, a
// deckhand process on a localcluster, the devcluster of `make run`):
// bounded waits, per-test contexts, namespaces of a test's own.
package testutil

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

// pollInterval is how often Eventually asks: often enough that a test
// waits little past the moment its condition holds, rarely enough that the
// API server of a loaded machine is not kept busy by the polling itself.
const pollInterval = 100 * time.Millisecond

// requestTimeout bounds the requests the helpers make themselves.
const requestTimeout = 30 * time.Second

// Eventually polls cond every 100ms until it returns true, and fails t
// after timeout with the message and cond's last error.
func Eventually(t testing.TB, timeout time.Duration, cond func(ctx context.Context) (bool, error), format string, args ...any) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		ok, err := cond(ctx)
		last = err
		return ok && err == nil, nil
	})
	if err != nil {
		msg := fmt.Sprintf(format, args...)
		if last != nil {
			t.Fatalf("timed out after %s waiting until %s (last error: %v)", timeout, msg, last)
		}
		t.Fatalf("timed out after %s waiting until %s", timeout, msg)
	}
}

// Context returns a context that ends after timeout or when t ends,
// whichever comes first.
func Context(t testing.TB, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

// Namespace creates, with c, a namespace named after t with a random
// suffix, and deletes it when t ends.
func Namespace(t testing.TB, c client.Client) string {
	t.Helper()
	base := strings.ToLower(t.Name())
	base = strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			return r
		}
		return '-'
	}, base)
	if len(base) > 40 {
		base = base[:40]
	}
	name := strings.Trim(base, "-") + "-" + utilrand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if err := c.Create(ctx, ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		_ = c.Delete(ctx, ns)
	})
	return name
}

// Create creates obj with c, failing t if the API server refuses it.
func Create(ctx context.Context, t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// Time parses an RFC 3339 time (a fraction of a second allowed), failing t
// if s is not one.
func Time(t testing.TB, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("parsing time %q: %v", s, err)
	}
	return v
}

// WantError fails t unless err is nil when want is empty, or an error whose
// message contains want otherwise: the check of a table of valid and
// invalid inputs, whose invalid cases name the field they get wrong.
func WantError(t testing.TB, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}

// Get reads the object at key into obj with c and returns obj, failing t if
// the API server does not return it.
func Get[T client.Object](ctx context.Context, t testing.TB, c client.Client, key client.ObjectKey, obj T) T {
	t.Helper()
	if err := c.Get(ctx, key, obj); err != nil {
		t.Fatalf("getting %T %s: %v", obj, key, err)
	}
	return obj
}

// Update reads obj, applies change to it and updates it with c (opts
// naming the field manager, say), starting again from a fresh read while
// the update is refused, as it is for a conflict with a controller's write
// meanwhile; it fails t after timeout with the last error.
func Update[T client.Object](t testing.TB, c client.Client, timeout time.Duration, obj T, change func(T), opts ...client.UpdateOption) {
	t.Helper()
	key := client.ObjectKeyFromObject(obj)
	Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, key, obj); err != nil {
			return false, err
		}
		change(obj)
		return true, c.Update(ctx, obj, opts...)
	}, "%T %s is updated", obj, key)
}

// ReadFile returns the file's content and fails t if it cannot be read.
func ReadFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// RepoRoot returns the repository root and fails t if the test does not
// run inside the repository.
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}
