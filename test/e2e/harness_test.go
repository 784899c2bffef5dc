package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestDeploymentBecomesReady proves the harness is a working cluster: a
// Deployment goes through kube-controller-manager (ReplicaSet, pods),
// kube-scheduler (binding) and kwok (Running, Ready).
func TestDeploymentBecomesReady(t *testing.T) {
	ns := namespace(t)
	labels := map[string]string{"app": "harness"}
	dep := testutil.Deployment(ns, "harness", 3, labels, corev1.Container{Name: "app", Image: "nginx:1.27"})
	ctx := context.Background()
	if err := suite.client.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
			return false, err
		}
		return dep.Status.ReadyReplicas == 3, nil
	}, "Deployment %s/harness has 3 ready replicas (has %d)", ns, dep.Status.ReadyReplicas)

	var pods corev1.PodList
	if err := suite.client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		t.Fatal(err)
	}
	ready := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			t.Errorf("pod %s was not scheduled", p.Name)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	if ready != 3 {
		t.Fatalf("want 3 Ready pods, got %d of %d", ready, len(pods.Items))
	}
}
