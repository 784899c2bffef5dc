package sidecarset

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
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
			var m memory
			m.of(&deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}})
			if tc.last > 0 {
				m.observeCost("s", tc.last)
			}
			if got := m.podEventDelay("s", time.Second); got != tc.want {
				t.Errorf("delay = %s, want %s", got, tc.want)
			}
			if got := m.podEventDelay("other", time.Second); got != time.Second {
				t.Errorf("another SidecarSet's delay = %s, want the base", got)
			}
			m.forget("s")
			if got := m.podEventDelay("s", time.Second); got != time.Second {
				t.Errorf("after forget: delay = %s, want the base", got)
			}
		})
	}
}
