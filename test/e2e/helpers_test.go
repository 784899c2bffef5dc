package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// tctx is a context bounded by the test's lifetime and two minutes.
func tctx(t *testing.T) context.Context { return testutil.Context(t, 2*time.Minute) }

func create(t *testing.T, obj client.Object) {
	t.Helper()
	testutil.Create(tctx(t), t, suite.client, obj)
}

// deployment is a Deployment whose pods kwok runs (Running and Ready).
func deployment(ns, name string, replicas int32, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
}

// livePods lists the pods of ns matching labels that are not being deleted.
func livePods(ctx context.Context, ns string, labels map[string]string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := suite.client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
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
