package podset

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/podcache"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// podClient is a fake API server holding pods, indexed by controller as
// the manager's cache is.
func podClient(pods ...*corev1.Pod) client.WithWatch {
	b := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).
		WithIndex(&corev1.Pod{}, podControllerIndex, podControllerKey).
		WithStatusSubresource(&corev1.Pod{})
	for _, p := range pods {
		b = b.WithObjects(p.DeepCopy())
	}
	return b.Build()
}

// scopePod is a pod of s named name, created from its template on revision.
func scopePod(s *scope, name, revision string) *corev1.Pod {
	p := newPod(s.ps, revision, s.inPlace)
	p.GenerateName, p.Name = "", name
	return p
}

// TestExpectationsMetAfterThePodsWereReadDoNotAllowASync: a sync reads the
// pods while a create of the previous sync is not in the cache yet; the
// create's watch event arrives right after the read and meets the
// expectations. The sync must not act on what it read: counting 2 of 3
// replicas, it would create the third a second time.
func TestExpectationsMetAfterThePodsWereReadDoNotAllowASync(t *testing.T) {
	s := webScope(3)
	c := podClient(scopePod(s, "web-a", s.revision), scopePod(s, "web-b", s.revision))
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

// TestGateClosesWaitForTheCache: a sync of an in-place rollout closes the
// gates of as many pods as maxUnavailable allows; the next sync, four
// seconds later, reads a cache that does not show the closes yet. The
// pods' ages have by then put two other pods first in the deletion order
// (log2 buckets of their Ready time, ties broken by UID): acting on that
// cache, the sync would count every pod available and close two more
// gates. It must wait until the cache shows the closes, and then close
// none.
func TestGateClosesWaitForTheCache(t *testing.T) {
	syncScope := func() *scope {
		s := webScope(6)
		s.ps.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(2))
		s.ps.Spec.UpdateStrategy.MaxSurge = ptr.To(intstr.FromInt32(0))
		return s
	}
	s := syncScope()
	// At the first sync web-x* are Ready for 5 s (log2 bucket 32 of
	// nanoseconds), web-a* for 9 s (33): x first. Four seconds later both
	// are in bucket 33, and UID order puts a first.
	readyFor := map[string]time.Duration{"web-x1": 5 * time.Second, "web-x2": 5 * time.Second,
		"web-a1": 9 * time.Second, "web-a2": 9 * time.Second, "web-m1": time.Hour, "web-m2": time.Hour}
	var pods []*corev1.Pod
	for name, age := range readyFor {
		p := scopePod(s, name, "r0")
		p.UID = types.UID("uid-" + name)
		p.Spec.NodeName = "node-a"
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-age))},
			{Type: inplacegate.ConditionType, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-age))},
		}
		pods = append(pods, p)
	}
	live, stale := podClient(pods...), podClient(pods...)
	r := clientReconciler(live)
	r.pods = podcache.ListerFromReader(stale)
	clk := clocktesting.NewFakePassiveClock(now)
	r.Clock = clk
	r.trust.confirm(s.key, s.ps.UID)
	ctx := context.Background()
	sync := func() {
		t.Helper()
		s := syncScope()
		if _, err := r.claimPods(ctx, s); err != nil {
			t.Fatal(err)
		}
		if _, err := r.managePods(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	closed := func() []string { return testutil.ClosedGates(ctx, t, live) }

	sync()
	if got := closed(); len(got) != 2 || got[0] != "web-x1" || got[1] != "web-x2" {
		t.Fatalf("the first sync closed the gates of %v, want web-x1 and web-x2", got)
	}
	clk.SetTime(now.Add(4 * time.Second))
	sync()
	if got := closed(); len(got) != 2 {
		t.Fatalf("a sync on a cache without the first sync's gate closes closed the gates of %v: more than maxUnavailable 2", got)
	}

	// The cache catches up: the pods' watch events reach the handler.
	h, q := &podEventHandler{client: live, exp: r.Expectations}, eventQueue(t)
	for _, name := range []string{"web-x1", "web-x2"} {
		var old, cur corev1.Pod
		key := client.ObjectKey{Namespace: s.ps.Namespace, Name: name}
		if err := stale.Get(ctx, key, &old); err != nil {
			t.Fatal(err)
		}
		if err := live.Get(ctx, key, &cur); err != nil {
			t.Fatal(err)
		}
		h.Update(ctx, event.TypedUpdateEvent[client.Object]{ObjectOld: &old, ObjectNew: &cur}, q)
	}
	if !r.Expectations.Satisfied(s.key) {
		t.Fatalf("the gate closes observed, expectations still pending: %v", r.Expectations.PendingUpdates(s.key))
	}
	r.pods = podcache.ListerFromReader(live)
	sync()
	if got := closed(); len(got) != 2 {
		t.Fatalf("a sync on a cache that shows two gates closed closed the gates of %v, want only those two", got)
	}
}

// TestDeletedPodAbandonsItsGateClose: a pod deleted before the cache showed
// its gate closed holds no sync back.
func TestDeletedPodAbandonsItsGateClose(t *testing.T) {
	s := webScope(1)
	p := scopePod(s, "web-x", "r0")
	exp := expectations.New()
	exp.ExpectUpdates(s.key, map[string]string{gateKey(p): string(corev1.ConditionFalse)})
	h := &podEventHandler{exp: exp}
	h.Delete(context.Background(), event.TypedDeleteEvent[client.Object]{Object: p}, eventQueue(t))
	if !exp.Satisfied(s.key) {
		t.Fatalf("the pod is gone, expectations still pending: %v", exp.PendingUpdates(s.key))
	}
}

// eventQueue is a controller's work queue, shut down when t ends.
func eventQueue(t *testing.T) queue {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	return q
}
