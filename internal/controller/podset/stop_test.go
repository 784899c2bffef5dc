package podset

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestCreatePodsFinishesSentCreatesWhenStopping: a manager that stops while
// a create is in flight lets that create finish (cancelled, the API server
// could still store the pod after the next manager listed the pods, and a
// replica would be created twice), starts no further create, and reports
// no failure of the PodSet.
func TestCreatePodsFinishesSentCreatesWhenStopping(t *testing.T) {
	sent, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	var cancelledWhenSent atomic.Bool
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if calls.Add(1) == 1 {
				close(sent)
				<-release
			}
			// What the HTTP client would do with a cancelled request.
			if ctx.Err() != nil {
				cancelledWhenSent.Store(true)
				return ctx.Err()
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	r := clientReconciler(c)
	s := webScope(5)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.createPods(ctx, s, 5) }()
	select {
	case <-sent:
	case <-time.After(10 * time.Second):
		t.Fatal("no create was sent")
	}
	stop()
	close(release)
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("createPods did not return")
	}
	if cancelledWhenSent.Load() {
		t.Error("the create in flight was cancelled with the manager")
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d creates were sent, want 1 (none after the manager began to stop)", n)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("createPods returned %v, want context.Canceled", err)
	}
	if s.failure != nil {
		t.Errorf("stopping set a failure condition: %+v", s.failure)
	}
	var pods corev1.PodList
	if err := c.List(context.Background(), &pods); err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods stored: %d (%v), want the one sent", len(pods.Items), err)
	}
}
