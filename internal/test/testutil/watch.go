package testutil

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// WatchPods follows every pod of ns from now on: it lists them, passes each
// to seed (when not nil) and then every Added, Modified and Deleted event of
// a watch from that list's resourceVersion to handle, in order, on a
// goroutine of its own. The watch is re-established when the API server
// ends it, so no event is lost however long the test runs. stop ends the
// watch and waits until handle has returned for the last time; it is called
// when t ends if the test did not.
func WatchPods(t testing.TB, cs kubernetes.Interface, ns string, seed func(*corev1.Pod), handle func(watch.EventType, *corev1.Pod)) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Pods(ns).Watch(ctx, o)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if seed != nil {
		for i := range list.Items {
			seed(&list.Items[i])
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted) {
				continue
			}
			handle(ev.Type, p)
		}
	}()
	stop = func() { cancel(); w.Stop(); <-done }
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			stop()
		}
	})
	return stop
}
