package sidecarset_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// The helpers of this file read what the controller reports besides the
// SidecarSet's status: Events, metrics and messages.

// counterTotal sums, from the in-process manager's registry, the counters
// of the metrics whose name is matched and that carry label=value.
func counterTotal(t *testing.T, matched func(metric string) bool, label, value string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, f := range families {
		if !matched(f.GetName()) {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// sidecarSetReconciles reads controller_runtime_reconcile_total for the
// sidecarset controller (all results) from the in-process manager's registry.
func sidecarSetReconciles(t *testing.T) float64 {
	t.Helper()
	return counterTotal(t, func(metric string) bool { return metric == "controller_runtime_reconcile_total" }, "controller", "sidecarset")
}

// waitReconcileCounted waits until sidecarSetReconciles exceeds before and
// returns it: the controller counts a reconcile once it returns, which can
// be after the status it wrote is visible.
func waitReconcileCounted(t *testing.T, before float64) float64 {
	t.Helper()
	var now float64
	testutil.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		now = sidecarSetReconciles(t)
		return now > before, nil
	}, "a reconcile of the sidecarset controller counted (else the metric read is wrong)")
	return now
}

// waitEvent waits for an event about the SidecarSet with the given type and
// reason whose note contains text.
func waitEvent(t *testing.T, sidecarSet, typ, reason, text string) {
	t.Helper()
	waitEventMatching(t, sidecarSet, fmt.Sprintf("a %s event %s mentioning %s", typ, reason, text), func(e eventsv1.Event) bool {
		return e.Type == typ && e.Reason == reason && strings.Contains(e.Note, text)
	})
}

// waitEventOf waits for an Event about SidecarSet sidecarSet with one of
// the reasons of want, whose note mentions want[reason].
func waitEventOf(t *testing.T, sidecarSet string, want map[string]string) {
	t.Helper()
	waitEventMatching(t, sidecarSet, fmt.Sprintf("an event with one of %v", want), func(e eventsv1.Event) bool {
		text, ok := want[e.Reason]
		return ok && strings.Contains(e.Note, text)
	})
}

// waitEventMatching waits for an Event about SidecarSet sidecarSet that
// match accepts.
func waitEventMatching(t *testing.T, sidecarSet, what string, match func(eventsv1.Event) bool) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "SidecarSet" && e.Regarding.Name == sidecarSet && match(e) {
				return true, nil
			}
		}
		return false, nil
	}, "%s about SidecarSet %s", what, sidecarSet)
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
