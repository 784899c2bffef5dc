package testutil

import (
	"context"
	"slices"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WaitEvent waits up to timeout for an Event of namespace ns that match
// accepts, and returns it; what names it in the failure.
func WaitEvent(t testing.TB, c client.Reader, ns string, timeout time.Duration, what string, match func(eventsv1.Event) bool) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := c.List(ctx, &evs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		i := slices.IndexFunc(evs.Items, match)
		if i >= 0 {
			found = evs.Items[i]
		}
		return i >= 0, nil
	}, "%s", what)
	return found
}
