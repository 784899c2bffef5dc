package eviction_test

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/deckhand-dev/deckhand/internal/eviction"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// What became of a pod after an eviction.
const (
	evicted = "evicted"
	kept    = "kept"
)

var env *testenv.Env

// What an eviction returns is the API server's decision, so the tests ask
// a real one; no manager runs and no controller computes budgets: a test
// writes a budget's status itself.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}

// runningPod creates a pod labelled app=name that the API server takes for
// Running and Ready: the Eviction API skips the budgets of a Pending pod
// and lets a budget at its limit give up a pod that is not Ready.
func runningPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	ctx := testutil.Context(t, 30*time.Second)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
	testutil.Create(ctx, t, env.Client, pod)
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatalf("marking pod %s Running and Ready: %v", name, err)
	}
	return pod
}

// budget creates a PodDisruptionBudget called name over app=app and writes
// the status a disruption controller would: one healthy pod, none to give.
func budget(t *testing.T, ns, name, app string) {
	t.Helper()
	ctx := testutil.Context(t, 30*time.Second)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}
	testutil.Create(ctx, t, env.Client, pdb)
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, CurrentHealthy: 1, DesiredHealthy: 1, ExpectedPods: 1}
	if err := env.Client.Status().Update(ctx, pdb); err != nil {
		t.Fatalf("writing the status of PDB %s: %v", name, err)
	}
}

// changed updates pod behind the caller's back and returns the copy the
// caller had read.
func changed(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	read := pod.DeepCopy()
	pod.Labels["touched"] = "yes"
	if err := env.Client.Update(testutil.Context(t, 30*time.Second), pod); err != nil {
		t.Fatalf("updating pod %s: %v", pod.Name, err)
	}
	return read
}

// TestEvict asks the real Eviction API and checks the outcome Evict
// reports and what became of the pod.
func TestEvict(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup returns the pod as the caller saw it.
		setup       func(t *testing.T, ns string) *corev1.Pod
		sameVersion bool
		want        eviction.Result
		// after is what became of the pod: evicted (being deleted or gone),
		// kept (there, not being deleted), or "" when there was none.
		after string
		// message is part of DisruptionMessage of the error.
		message string
	}{
		{name: "no budget", setup: func(t *testing.T, ns string) *corev1.Pod { return runningPod(t, ns, "web") },
			want: eviction.Evicted, after: evicted},
		{name: "a budget with no disruption left", setup: func(t *testing.T, ns string) *corev1.Pod {
			pod := runningPod(t, ns, "web")
			budget(t, ns, "web", "web")
			return pod
		}, want: eviction.Blocked, after: kept, message: "The disruption budget web needs 1 healthy pods and has 1 currently"},
		{name: "gone", setup: func(t *testing.T, ns string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: "gone"}}
		}, want: eviction.Stale, message: "not found"},
		{name: "a successor of the same name", setup: func(t *testing.T, ns string) *corev1.Pod {
			pod := runningPod(t, ns, "web").DeepCopy()
			pod.UID = "predecessor"
			return pod
		}, want: eviction.Stale, after: kept, message: "the UID in the precondition (predecessor) does not match"},
		{name: "changed since read, same version asked", sameVersion: true, setup: func(t *testing.T, ns string) *corev1.Pod {
			return changed(t, runningPod(t, ns, "web"))
		}, want: eviction.Stale, after: kept, message: "the ResourceVersion in the precondition"},
		{name: "changed since read, any version", setup: func(t *testing.T, ns string) *corev1.Pod {
			return changed(t, runningPod(t, ns, "web"))
		}, want: eviction.Evicted, after: evicted},
		{name: "two budgets", setup: func(t *testing.T, ns string) *corev1.Pod {
			pod := runningPod(t, ns, "web")
			budget(t, ns, "web", "web")
			budget(t, ns, "web-too", "web")
			return pod
		}, want: eviction.Failed, after: kept, message: "more than one PodDisruptionBudget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			pod := tc.setup(t, ns)
			ctx := testutil.Context(t, 30*time.Second)
			got, err := eviction.Evict(ctx, env.Client, pod, tc.sameVersion)
			if got != tc.want {
				t.Fatalf("Evict = %v (%v), want %v", got, err, tc.want)
			}
			if (err == nil) != (tc.want == eviction.Evicted) {
				t.Fatalf("Evict = %v with error %v", got, err)
			}
			if err != nil && !strings.Contains(eviction.DisruptionMessage(err), tc.message) {
				t.Errorf("DisruptionMessage = %q, want it to contain %q", eviction.DisruptionMessage(err), tc.message)
			}
			if tc.after == "" {
				return
			}
			live, err := testutil.LivePods(ctx, env.Client, ns, map[string]string{"app": "web"})
			if err != nil {
				t.Fatalf("listing pod web: %v", err)
			}
			after := evicted
			if len(live) == 1 {
				after = kept
			}
			if after != tc.after {
				t.Errorf("pod web afterwards: %s, want %s", after, tc.after)
			}
		})
	}
}
