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
)

// tctx is a context bounded by the test's lifetime and two minutes.
func tctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func eventually(t *testing.T, timeout time.Duration, cond func(ctx context.Context) (bool, error), format string, args ...any) {
	t.Helper()
	testenv.Eventually(t, timeout, cond, format, args...)
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := suite.client.Create(tctx(t), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
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

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
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

func conditionTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
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
	return testenv.Namespace(t, suite.client)
}
