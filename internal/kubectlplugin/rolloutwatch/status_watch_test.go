package rolloutwatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/deckhand-dev/deckhand/internal/kubectlplugin"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestStatusWatchPodSet: a PodSet whose pods cannot become ready and whose
// progress deadline is short fails (exit 1) once the controller reports
// ProgressDeadlineExceeded; one whose pods a kubelet would report ready is
// done (exit 0); one whose pods stay pending, without a deadline, times out
// (exit 2).
func TestStatusWatchPodSet(t *testing.T) {
	ctx := testutil.Context(t, 3*time.Minute)

	t.Run("pods never ready, progress deadline 2s: failed", func(t *testing.T) {
		ps := createPodSet(ctx, t, 1, ptr.To[int32](2))
		code, err := watchPodSet(ctx, t, ps, "30s")
		if code != kubectlplugin.ExitFailed || !strings.Contains(err.Error(), "ProgressDeadlineExceeded") {
			t.Fatalf("exit %d (%v), want %d with ProgressDeadlineExceeded", code, err, kubectlplugin.ExitFailed)
		}
	})

	t.Run("pods ready: done", func(t *testing.T) {
		ps := createPodSet(ctx, t, 2, nil)
		var code int
		watchCtx, cancel := context.WithCancel(ctx)
		exited := make(chan struct{})
		go func() {
			defer close(exited)
			code, _ = watchPodSet(watchCtx, t, ps, "90s")
		}()
		// The command logs through t: it must end before the test does.
		defer func() { cancel(); <-exited }()
		testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
			return markPodsReady(ctx, ps.Namespace, 2)
		}, "the PodSet's 2 pods are created and marked ready")
		if <-exited; code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
	})

	t.Run("pods pending, no deadline: timed out", func(t *testing.T) {
		ps := createPodSet(ctx, t, 1, nil)
		if code, err := watchPodSet(ctx, t, ps, "3s"); code != kubectlplugin.ExitTimedOut {
			t.Fatalf("exit %d (%v), want %d", code, err, kubectlplugin.ExitTimedOut)
		}
	})
}
