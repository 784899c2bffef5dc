package sidecarset

import (
	"testing"
	"time"
)

func TestPodEventDelayFollowsReconcileCost(t *testing.T) {
	for _, tc := range []struct {
		name string
		last time.Duration // 0: no reconcile seen
		want time.Duration
	}{
		{name: "no reconcile yet", want: time.Second},
		{name: "fast reconcile keeps the base delay", last: 20 * time.Millisecond, want: time.Second},
		{name: "a reconcile of a tenth of the base", last: 100 * time.Millisecond, want: time.Second},
		{name: "slow reconcile: ten times it", last: 370 * time.Millisecond, want: 3700 * time.Millisecond},
		{name: "capped", last: 5 * time.Second, want: maxPodEventDelay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c reconcileCosts
			if tc.last > 0 {
				c.observe("s", tc.last)
			}
			if got := c.delay("s", time.Second); got != tc.want {
				t.Errorf("delay = %s, want %s", got, tc.want)
			}
			if got := c.delay("other", time.Second); got != time.Second {
				t.Errorf("another SidecarSet's delay = %s, want the base", got)
			}
			c.forget("s")
			if got := c.delay("s", time.Second); got != time.Second {
				t.Errorf("after forget: delay = %s, want the base", got)
			}
		})
	}
}
