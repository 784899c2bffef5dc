package metricstrigger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// A two-pod Deployment on a fake node, both pods at 64Mi of a 256Mi limit;
// one of them then leaks 4Mi a second (its simulated working set grows
// with its age). A memory trigger at 50% of the limit, sustained for 45s,
// lists the leaking pod as held for 45s, evicts it once metrics-server has
// reported it above the threshold for 45s, leaves the flat one alone, and
// records the trigger and the value in history.
func TestIntegrationMemoryEvictsTheLeakingPod(t *testing.T) {
	needEnv(t)
	ctx := testutil.Context(t, 4*time.Minute)
	ns := env.Namespace(t)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"},
					Annotations: map[string]string{localcluster.SimMemoryWorkingSetAnnotation: "64Mi"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1",
					Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}}}},
			},
		},
	}
	testutil.Create(ctx, t, env.Client, d)
	var pods []corev1.Pod
	testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		pods, err = testutil.LivePods(ctx, env.Client, ns, map[string]string{"app": "web"})
		if err != nil || len(pods) != 2 {
			return false, err
		}
		return podutil.IsPodReady(&pods[0]) && podutil.IsPodReady(&pods[1]), nil
	}, "both pods Ready")
	leaking, flat := pods[0].Name, pods[1].Name
	watch := testutil.WatchDisruptions(t, env.Clientset, ns, labels.SelectorFromSet(labels.Set{"app": "web"}), 2)
	patched := time.Now()
	leak := fmt.Sprintf(`{"metadata":{"annotations":{%q:"4Mi"}}}`, localcluster.SimMemoryLeakPerSecondAnnotation)
	if err := env.Client.Patch(ctx, &pods[0], client.RawPatch(types.MergePatchType, []byte(leak))); err != nil {
		t.Fatal(err)
	}

	rs := &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mem"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: "web"}},
			Triggers: []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{
				Container: "app", PercentOfLimit: ptr.To[int32](50), For: &metav1.Duration{Duration: 45 * time.Second}}}},
			Action: deckhandv1alpha1.RestartAction{Scope: deckhandv1alpha1.RestartScopePod, MaxConcurrent: 1, MinPodAge: &metav1.Duration{}},
		},
	}
	testutil.Create(ctx, t, env.Client, rs)

	// First listed, held until it has been above for 45s.
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		got := &deckhandv1alpha1.RestartSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rs), got); err != nil {
			return false, err
		}
		for _, c := range got.Status.Candidates {
			if c.Pod == leaking && c.Trigger == deckhandv1alpha1.RestartTriggerMemory && strings.HasPrefix(c.HeldBy, "for 45s: above the threshold since ") {
				return true, nil
			}
		}
		return false, nil
	}, "the leaking pod is a candidate held for 45s")

	var evicted deckhandv1alpha1.RestartRecord
	var last *deckhandv1alpha1.RestartSchedule
	t.Cleanup(func() {
		if t.Failed() && last != nil {
			t.Logf("last status: candidates %+v, conditions %+v", last.Status.Candidates, last.Status.Conditions)
		}
	})
	testutil.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, error) {
		got := &deckhandv1alpha1.RestartSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rs), got); err != nil {
			return false, err
		}
		last = got
		for _, h := range got.Status.History {
			if h.Trigger == deckhandv1alpha1.RestartTriggerMemory {
				evicted = h
				return true, nil
			}
		}
		return false, nil
	}, "the memory trigger evicts a pod")
	if evicted.Pod != leaking || evicted.Workload != "Deployment/web" || evicted.Result != deckhandv1alpha1.RestartSucceeded {
		t.Fatalf("history entry %+v, want the leaking pod %s evicted (flat: %s)", evicted, leaking, flat)
	}
	// The value is the working set seen, above the threshold.
	if v, err := resource.ParseQuantity(evicted.Value); err != nil || v.Cmp(resource.MustParse("128Mi")) <= 0 {
		t.Fatalf("history value %q, want a working set above 128Mi", evicted.Value)
	}
	// Sustained for 45s: no sample before the leak annotation was set can
	// be above the threshold.
	if d := evicted.StartTime.Sub(patched); d < 45*time.Second {
		t.Fatalf("evicted %s after the leak started, before its working set could have been above the threshold for 45s", d)
	}
	if !strings.Contains(evicted.Message, "50% of 256Mi") {
		t.Errorf("history message %q does not name the threshold", evicted.Message)
	}
	// The flat pod and the replacement stay.
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		got := &deckhandv1alpha1.RestartSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rs), got); err != nil {
			return false, err
		}
		// Two samples of the replacement below the threshold: no candidate left.
		return got.Status.CandidateCount == 0, nil
	}, "no candidate once the leaking pod is replaced")
	deleted, names := watch.Deleted()
	if len(deleted) != 1 || names[deleted[0]] != leaking {
		var got []string
		for _, uid := range deleted {
			got = append(got, names[uid])
		}
		t.Fatalf("deleted %v, want only the leaking pod %s:\n%s", got, leaking, watch.History())
	}
}

// percentOfLimit on a container with no memory limit: the pod is never a
// candidate however much it uses, and MetricsUnavailable says which
// container lacks the limit.
func TestIntegrationMemoryPercentWithoutLimit(t *testing.T) {
	needEnv(t)
	ctx := testutil.Context(t, 3*time.Minute)
	ns := env.Namespace(t)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nolimit"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nolimit"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nolimit"},
					Annotations: map[string]string{localcluster.SimMemoryWorkingSetAnnotation: "1Gi"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
	testutil.Create(ctx, t, env.Client, d)
	rs := &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mem"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: "nolimit"}},
			Triggers: []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{
				Container: "app", PercentOfLimit: ptr.To[int32](1), For: &metav1.Duration{}}}},
			Action: deckhandv1alpha1.RestartAction{Scope: deckhandv1alpha1.RestartScopePod, MaxConcurrent: 1, MinPodAge: &metav1.Duration{}},
		},
	}
	testutil.Create(ctx, t, env.Client, rs)
	var got *deckhandv1alpha1.RestartSchedule
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		got = &deckhandv1alpha1.RestartSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rs), got); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "NoMemoryLimit" && strings.Contains(c.Message, "/app has no memory limit"), nil
	}, "MetricsUnavailable names the container without a limit")
	if len(got.Status.Candidates) > 0 || len(got.Status.History) > 0 {
		t.Fatalf("acted on a pod without a limit: candidates %+v, history %+v", got.Status.Candidates, got.Status.History)
	}
}
