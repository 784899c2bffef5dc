package shutdown

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestDrain(t *testing.T) {
	const period = 10 * time.Second
	cases := map[string]struct {
		second   bool // a second signal during the drain
		wantExit bool
	}{
		"one signal: stop after the drain period": {},
		"a second signal: exit at once":           {second: true, wantExit: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			drained := 0
			d := New(period, func() { drained++ })
			d.clock = clk
			sigs := make(chan os.Signal, 2)
			var exited atomic.Bool
			ctx := d.context(sigs, logr.Discard(), func() { exited.Store(true) })

			if err := d.Checker(nil); err != nil {
				t.Fatalf("ready before any signal: %v", err)
			}
			sigs <- syscall.SIGTERM
			waitFor(t, func() bool { return d.Checker(nil) != nil && clk.HasWaiters() })
			if drained != 1 {
				t.Errorf("onDrain ran %d times at the drain's start, want 1", drained)
			}
			if ctx.Err() != nil {
				t.Fatal("the context ended as the drain began")
			}
			if tc.second {
				sigs <- syscall.SIGINT
			} else {
				clk.Step(period - time.Millisecond)
				if done(ctx, 50*time.Millisecond) {
					t.Fatal("the context ended before the drain period was over")
				}
				clk.Step(time.Millisecond)
			}
			if !done(ctx, 10*time.Second) {
				t.Fatal("the context did not end")
			}
			if exited.Load() != tc.wantExit {
				t.Errorf("exit called: %t, want %t", exited.Load(), tc.wantExit)
			}
			if err := d.Checker(nil); err == nil {
				t.Error("ready after the drain")
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// done reports whether ctx ends within d.
func done(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(d):
		return false
	}
}
