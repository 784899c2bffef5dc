package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// tctx is a context bounded by the test's lifetime and two minutes.
func tctx(t *testing.T) context.Context { return testutil.Context(t, 2*time.Minute) }

func create(t *testing.T, obj client.Object) {
	t.Helper()
	testutil.Create(tctx(t), t, suite.client, obj)
}

func conditionsString(conds []metav1.Condition) string {
	var b strings.Builder
	for _, c := range conds {
		b.WriteString(c.Type + "=" + string(c.Status) + "(" + c.Reason + ") ")
	}
	return b.String()
}

// namespace creates a namespace for t and fails t if the manager, under its
// own identity, is refused a request while t runs.
func namespace(t *testing.T) string {
	t.Helper()
	testenv.FailOnRefusals(t, suite.cluster.ManagerRefusals)
	return testutil.Namespace(t, suite.client)
}

// pauseContainer is the container of the workloads kwok runs (Running and
// Ready) in these tests.
var pauseContainer = corev1.Container{Name: "app", Image: "registry.k8s.io/pause:3.10"}

// createObservedSidecarSet creates ss, deletes it when t ends, and waits
// until the manager has seen it (its controller wrote status): the webhook
// injects from the manager's informer cache.
func createObservedSidecarSet(t *testing.T, ss *deckhandv1alpha1.SidecarSet) {
	t.Helper()
	create(t, ss)
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), ss) })
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		err := suite.client.Get(ctx, client.ObjectKeyFromObject(ss), ss)
		return err == nil && ss.Status.ObservedGeneration == ss.Generation, err
	}, "SidecarSet %s is observed by the manager", ss.Name)
}

// sidecarSetFor is the SidecarSet, named ns, that injects sidecar into the
// pods of ns labelled labels.
func sidecarSetFor(ns string, labels map[string]string, sidecar deckhandv1alpha1.SidecarContainer) *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: labels},
			Namespace:  ns,
			Containers: []deckhandv1alpha1.SidecarContainer{sidecar},
		},
	}
}

// waitReadyPods waits until ns has n live pods labelled labels, all of
// them Ready, and returns them.
func waitReadyPods(t *testing.T, ns string, n int32, labels map[string]string) []corev1.Pod {
	t.Helper()
	return testutil.WaitReadyPods(t, suite.client, ns, labels, int(n))
}

// countReady is how many of pods are Ready.
func countReady(pods []corev1.Pod) int32 {
	ready := int32(0)
	for i := range pods {
		if podutil.IsPodReady(&pods[i]) {
			ready++
		}
	}
	return ready
}
