package podset_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// lostCreateEvery, when set before the manager starts, makes every n-th pod
// create of the controller's client store the pod and then answer as the API
// server does when it gave up waiting (504 Timeout): the pod exists, and the
// controller cannot know it.
var lostCreateEvery atomic.Int64

// losingCreates wraps c so that every n-th pod create is stored but answered
// with a timeout.
func losingCreates(c client.Client, every int64) client.Client {
	return &losingClient{Client: c, every: every}
}

type losingClient struct {
	client.Client
	every   int64
	creates atomic.Int64
}

func (c *losingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if err := c.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	if _, ok := obj.(*corev1.Pod); ok && c.creates.Add(1)%c.every == 0 {
		return apierrors.NewTimeoutError("the server was unable to return a response in the time allotted, but may still be processing the request", 1)
	}
	return nil
}

// TestCreateWithUnknownOutcomeIsNotRepeated: a create answered with a
// timeout may have stored its pod (here it always has), so the controller
// keeps expecting it instead of creating another; with a pod cache that
// sees the controller's writes late, lowering the expectation would show a
// replica missing and create one too many. The watch must never see more
// active pods than replicas, and exactly as many pods are ever created.
func TestCreateWithUnknownOutcomeIsNotRepeated(t *testing.T) {
	lostCreateEvery.Store(4)
	slowWatchDelay.Store(int64(40 * time.Millisecond))
	env.StopManager()
	if _, err := env.StartManager(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		lostCreateEvery.Store(0)
		slowWatchDelay.Store(0)
		env.StopManager()
		if _, err := env.StartManager(); err != nil {
			t.Errorf("restarting the normal manager: %v", err)
		}
	})
	ns := env.Namespace(t)
	pw := watchPods(t, ns)
	ps := newPodSet(ns, "lost", 40)
	mustCreate(t, ps)
	waitConverged(t, ps, 40, 3*time.Minute)
	pw.wantPods(t, ns, 40, 40)
}
