package podset_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TestLateCreateOfPreviousProcessIsNotRepeated: a pod create sent by a
// manager that is gone (killed, or the leader before this one) may be
// stored after the next manager's cache has synced; that manager has no
// expectation of it. Here a PodSet of 3 has lost a pod while no manager
// ran, a new manager starts and syncs once, and only then does the
// previous manager's replacement pod arrive. Time stands still for the new
// manager (a fake clock) until the pod is stored: the controller must not
// replace the pod before writes sent before it started are settled, and
// then must count the late pod. A watch over the whole test never sees more
// active pods than replicas.
func TestLateCreateOfPreviousProcessIsNotRepeated(t *testing.T) {
	ps, pw := createWatchedPodSet(t, "late", 3)
	waitConverged(t, ps, 3, 2*time.Minute)

	env.StopManager()
	clk := clocktesting.NewFakeClock(time.Now())
	useManagerSettings(t, managerSettings{clock: clk})
	// The replica the previous manager was replacing.
	pods := mustOwned(t, ps)
	if err := env.Client.Delete(ctxT(t), &pods[0], client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the pod is gone", func(ctx context.Context) (bool, string, error) {
		owned, err := ownedPods(ctx, ps)
		return len(activeNames(owned)) == 2 && len(owned) == 2, fmt.Sprintf("%d pods", len(owned)), err
	})
	if _, err := env.StartManager(); err != nil {
		t.Fatal(err)
	}
	// The new manager has synced once when its status counts 2 pods (or,
	// acting at once, it has replaced the pod).
	waitPodSet(t, ps, time.Minute, "the new manager has synced", func(cur *deckhandv1alpha1.PodSet, owned []corev1.Pod) (bool, string) {
		return cur.Status.Replicas == 2 || len(activeNames(owned)) == 3,
			fmt.Sprintf("status.replicas %d, %d active pods", cur.Status.Replicas, len(activeNames(owned)))
	})
	// The previous manager's create arrives.
	late := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: ps.Name + "-", Namespace: ps.Namespace,
			Labels:          pods[1].Labels,
			Annotations:     pods[1].Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ps, deckhandv1alpha1.GroupVersion.WithKind("PodSet"))},
		},
		Spec: *ps.Spec.Template.Spec.DeepCopy(),
	}
	late.OwnerReferences[0].BlockOwnerDeletion = ptr.To(true)
	mustCreate(t, late)
	// Time moves on for the new manager until it acts; it must find the
	// late pod, and create nothing.
	waitFor(t, ps, 2*time.Minute, "the status counts 3 pods again", func(cur *deckhandv1alpha1.PodSet) (bool, string) {
		clk.Step(time.Second)
		return cur.Status.Replicas == 3, fmt.Sprintf("status.replicas %d", cur.Status.Replicas)
	})
	waitConverged(t, ps, 3, 2*time.Minute)
	// 3 created at first, and the late one: 4 pods ever, never more than 3 at once.
	pw.wantPods(t, ps.Namespace, 3, 4)
}

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
