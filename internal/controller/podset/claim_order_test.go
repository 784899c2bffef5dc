package podset

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/podcache"
)

// TestExpectationsMetAfterThePodsWereReadDoNotAllowASync: a sync reads the
// pods while a create of the previous sync is not in the cache yet; the
// create's watch event arrives right after the read and meets the
// expectations. The sync must not act on what it read: counting 2 of 3
// replicas, it would create the third a second time.
func TestExpectationsMetAfterThePodsWereReadDoNotAllowASync(t *testing.T) {
	ps := &deckhandv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "u1"}}
	ps.Spec.Replicas = ptr.To[int32](3)
	ps.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	ps.Spec.Template.Labels = map[string]string{"app": "web"}
	ps.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "nginx"}}
	pod := func(name string) *corev1.Pod {
		p := newPod(ps, "r1", "h1")
		p.GenerateName, p.Name = "", name
		return p
	}
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
		WithIndex(&corev1.Pod{}, podControllerIndex, podControllerKey).
		WithObjects(pod("web-a"), pod("web-b")).Build()
	key := "shop/web"
	exp := expectations.New()
	trust := newCacheTrust(time.Now().Add(-time.Hour))
	trust.confirm(key, ps.UID)
	r := &Reconciler{Client: c, APIReader: c, PodWriter: c, Recorder: events.NewFakeRecorder(100), Expectations: exp,
		Clock: clock.RealClock{}, pods: podcache.ListerFromReader(c), trust: trust}
	s := &scope{ps: ps, key: key, selector: labels.SelectorFromSet(ps.Spec.Template.Labels), revision: "r1", inPlace: "h1"}

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
