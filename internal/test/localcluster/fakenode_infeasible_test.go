package localcluster

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// TestFakeNodeReportsInfeasibleResize runs pods on a fake node that plays
// the static CPU manager policy (StaticCPUManagerNodePrefix) and follows
// them from a watch as the kubelet (v1.36) reports their resizes: a
// Guaranteed pod's CPU resize comes back PodResizePending with reason
// Infeasible and the kubelet's message, never PodResizeInProgress, the
// container keeping its resources and the pod Ready; asking for the old CPU
// again removes the condition, and a memory resize of the same pod
// completes. A Burstable pod's CPU resize on the same node completes.
func TestFakeNodeReportsInfeasibleResize(t *testing.T) {
	c, pods, ctx := fakeNodePods(t)
	node := StaticCPUManagerNodePrefix + "0"
	if err := c.CreateFakeNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	create := func(name string, res corev1.ResourceRequirements) *corev1.Pod {
		t.Helper()
		pod, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app:1", Resources: res}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return waitPod(t, ctx, pods, pod.Name, "", func(p *corev1.Pod) bool {
			return podutil.IsPodReady(p) && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Resources != nil &&
				podutil.SameCPUMemory(p.Status.ContainerStatuses[0].Resources, &res)
		})
	}
	resize := func(pod *corev1.Pod, res corev1.ResourceRequirements) string {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}]}}`,
			res.Requests.Cpu(), res.Requests.Memory(), res.Limits.Cpu(), res.Limits.Memory())
		p, err := pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize")
		if err != nil {
			t.Fatal(err)
		}
		return p.ResourceVersion
	}
	done := func(want corev1.ResourceRequirements) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			state, _ := podutil.PodResizeState(p, []string{"app"})
			return state == podutil.ResizeDone && podutil.SameCPUMemory(p.Status.ContainerStatuses[0].Resources, &want) &&
				podCondition(p, corev1.PodResizePending) == nil
		}
	}

	guaranteed := create("guaranteed", cpuMemory("100m", "64Mi"))
	if guaranteed.Status.QOSClass != corev1.PodQOSGuaranteed {
		t.Fatalf("pod QoS %s, want Guaranteed", guaranteed.Status.QOSClass)
	}
	rv := resize(guaranteed, cpuMemory("200m", "64Mi"))
	infeasible := waitPod(t, ctx, pods, guaranteed.Name, rv, func(p *corev1.Pod) bool {
		if cond := podCondition(p, corev1.PodResizeInProgress); cond != nil {
			t.Fatalf("an infeasible resize is in progress: %+v", cond)
		}
		state, _ := podutil.PodResizeState(p, []string{"app"})
		return state == podutil.ResizeInfeasible
	})
	old := cpuMemory("100m", "64Mi")
	if !podutil.IsPodReady(infeasible) || !podutil.SameCPUMemory(infeasible.Status.ContainerStatuses[0].Resources, &old) {
		t.Errorf("infeasible resize: Ready %v, resources %+v; want Ready with the resources it started with",
			podutil.IsPodReady(infeasible), infeasible.Status.ContainerStatuses[0].Resources)
	}
	if cond := podCondition(infeasible, corev1.PodResizePending); cond.Message != `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"` {
		t.Errorf("PodResizePending message %q, want the kubelet's", cond.Message)
	}
	for _, want := range []corev1.ResourceRequirements{cpuMemory("100m", "64Mi"), cpuMemory("100m", "128Mi")} {
		rv := resize(guaranteed, want)
		waitPod(t, ctx, pods, guaranteed.Name, rv, done(want))
	}

	burstable := create("burstable", corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("400m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	})
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("400m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	}
	rv = resize(burstable, want)
	waitPod(t, ctx, pods, burstable.Name, rv, func(p *corev1.Pod) bool {
		if state, _ := podutil.PodResizeState(p, []string{"app"}); state == podutil.ResizeInfeasible {
			t.Fatalf("a Burstable pod's CPU resize is infeasible: %+v", p.Status.Conditions)
		}
		return done(want)(p)
	})
}
