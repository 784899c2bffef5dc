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

// losingCreates wraps c so that every n-th pod create is stored and then
// answered as the API server does when it gave up waiting (504 Timeout): the
// pod exists, and the controller cannot know it.
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
	useManagerSettings(t, managerSettings{lostCreateEvery: 4, slowWatch: 40 * time.Millisecond})
	restartManager(t)
	ps, pw := createWatchedPodSet(t, "lost", 40)
	waitConverged(t, ps, 40, 3*time.Minute)
	pw.wantPods(t, ps.Namespace, 40, 40)
}
