package testutil

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Consistently calls cond every 100ms for window and fails t with the
// message and cond's error at the first call that returns one. An absence
// (no pod moved by a rollout that must stand still) can be shown only over
// a bounded time; window says how long, and should be several times what
// the absent thing would take to happen.
func Consistently(t testing.TB, window time.Duration, cond func(ctx context.Context) error, format string, args ...any) {
	t.Helper()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	end := time.Now().Add(window)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		err := cond(ctx)
		cancel()
		if err != nil {
			t.Fatalf("within %s, %s: %v", window, fmt.Sprintf(format, args...), err)
		}
		if !time.Now().Before(end) {
			return
		}
		<-tick.C
	}
}
