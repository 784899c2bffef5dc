package podset

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestExpectationsMetAfterThePodsWereReadDoNotAllowASync: a sync reads the
// pods while a create of the previous sync is not in the cache yet; the
// create's watch event arrives right after the read and meets the
// expectations. The sync must not act on what it read: counting 2 of 3
// replicas, it would create the third a second time.
func TestExpectationsMetAfterThePodsWereReadDoNotAllowASync(t *testing.T) {
	s := webScope(3)
	pod := func(name string) *corev1.Pod {
		p := newPod(s.ps, s.revision, s.inPlace)
		p.GenerateName, p.Name = "", name
		return p
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
		WithIndex(&corev1.Pod{}, podControllerIndex, podControllerKey).
		WithObjects(pod("web-a"), pod("web-b")).Build()
	r := clientReconciler(c)
	r.trust.confirm(s.key, s.ps.UID)
	key, exp := s.key, r.Expectations

	// The previous sync created web-c; the cache has not shown it yet.
	exp.ExpectCreations(key, 1)
	ctx := context.Background()
	if _, err := r.claimPods(ctx, s); err != nil {
		t.Fatal(err)
	}
	if len(s.pods) != 2 {
		t.Fatalf("claimed %d pods, want the 2 the cache shows", len(s.pods))
	}
	// Its watch event arrives now, after the read.
	exp.CreationObserved(key)
	if _, err := r.managePods(ctx, s); err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace("shop")); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("the sync created %d pod(s) from pods read before its expectations were met", len(pods.Items)-2)
	}
}
