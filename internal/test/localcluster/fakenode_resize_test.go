package localcluster

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// TestFakeNodeResizesContainers resizes a running pod's regular container
// and native sidecar through the pod resize subresource and follows the
// pod from a watch, as a kubelet reports a resize: containerStatuses report
// the resources the pod started with, then PodResizeInProgress while the
// resize lasts, then the new resources (and the requests as allocated) with
// the condition gone. Nothing restarts and the pod stays Ready.
func TestFakeNodeResizesContainers(t *testing.T) {
	_, pods, ctx := fakeNodePods(t)
	created := createOnFakeNode(t, ctx, pods, "resize", corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "sidecar", Image: "sidecar:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways), Resources: cpuMemory("50m", "32Mi")}},
		Containers:     []corev1.Container{{Name: "app", Image: "app:1", Resources: cpuMemory("100m", "64Mi")}, {Name: "other", Image: "other:1"}},
	})
	reports := func(want map[string]corev1.ResourceRequirements) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			if !podutil.IsPodReady(p) {
				return false
			}
			for _, cs := range allStatuses(p) {
				w, ok := want[cs.Name]
				if !ok {
					continue
				}
				if cs.Resources == nil || !podutil.SameCPUMemory(cs.Resources, &w) {
					return false
				}
			}
			return true
		}
	}
	started := waitPod(t, ctx, pods, created.Name, "", reports(map[string]corev1.ResourceRequirements{"app": cpuMemory("100m", "64Mi"), "sidecar": cpuMemory("50m", "32Mi")}))

	patch := `{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":"200m","memory":"128Mi"},"limits":{"cpu":"200m","memory":"128Mi"}}}],` +
		`"initContainers":[{"name":"sidecar","resources":{"requests":{"cpu":"70m","memory":"32Mi"},"limits":{"cpu":"70m","memory":"32Mi"}}}]}}`
	patchPod(t, ctx, pods, created.Name, patch, "resize")
	want := map[string]corev1.ResourceRequirements{"app": cpuMemory("200m", "128Mi"), "sidecar": cpuMemory("70m", "32Mi")}
	sawInProgress := false
	final := waitPod(t, ctx, pods, created.Name, started.ResourceVersion, func(p *corev1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodResizeInProgress {
				sawInProgress = true
				return false
			}
		}
		return sawInProgress && reports(want)(p)
	})
	if final.UID != created.UID {
		t.Fatalf("the pod was recreated (UID %s, was %s)", final.UID, created.UID)
	}
	if state, _ := podutil.PodResizeState(final, []string{"app", "sidecar", "other"}); state != podutil.ResizeDone {
		t.Errorf("resize state %v, want done", state)
	}
	for _, cs := range allStatuses(final) {
		if cs.Resources == nil {
			t.Errorf("container %s reports no resources: the API server would take the node for one without resize support", cs.Name)
		}
		if cs.RestartCount != 0 {
			t.Errorf("container %s restarted %d times: a resize restarts nothing", cs.Name, cs.RestartCount)
		}
		if w, ok := want[cs.Name]; ok {
			if cpu := cs.AllocatedResources[corev1.ResourceCPU]; cpu.Cmp(w.Requests[corev1.ResourceCPU]) != 0 {
				t.Errorf("container %s: allocatedResources %v, want the requests %v", cs.Name, cs.AllocatedResources, w.Requests)
			}
		}
	}
}

// TestFakeNodeDefersOversizedResize resizes a running pod's container to
// more CPU than the fake node has room for (FakeNodeResizeRoom) and follows
// the pod from a watch, as the kubelet (v1.36) reports it: PodResizePending with reason
// Deferred, never PodResizeInProgress, the container still reporting its old
// resources and the pod Ready. Asking for the old resources again removes
// the condition; a resize that fits then completes. A resize beyond the
// node's allocatable never reaches the node: the API server refuses it.
func TestFakeNodeDefersOversizedResize(t *testing.T) {
	c, pods, ctx := fakeNodePods(t)
	tooMuch := FakeNodeResizeRoom.Cpu().DeepCopy()
	tooMuch.Add(resource.MustParse("1"))
	res := func(cpu string) corev1.ResourceRequirements { return cpuMemory(cpu, "64Mi") }
	want := res("100m")
	pod := runWithResources(t, ctx, pods, fakeNode, "oversized", want)
	resize := func(cpu string) string {
		return patchPod(t, ctx, pods, pod.Name, resizePatch(res(cpu)), "resize").ResourceVersion
	}
	// Beyond the node's allocatable the API server refuses the resize itself.
	node, err := c.Clientset().CoreV1().Nodes().Get(ctx, fakeNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	beyond := node.Status.Allocatable.Cpu().DeepCopy()
	beyond.Add(resource.MustParse("1"))
	patch := resizePatch(res(beyond.String()))
	if _, err := pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize"); !apierrors.IsForbidden(err) {
		t.Fatalf("resize beyond the node's allocatable: want Forbidden, got %v", err)
	}

	rv := resize(tooMuch.String())
	deferred := waitPod(t, ctx, pods, pod.Name, rv, func(p *corev1.Pod) bool {
		if cond := podCondition(p, corev1.PodResizeInProgress); cond != nil {
			t.Fatalf("a resize beyond the node's room is in progress: %+v", cond)
		}
		state, _ := podutil.PodResizeState(p, []string{"app"})
		return state == podutil.ResizeDeferred
	})
	if !podutil.IsPodReady(deferred) || !podutil.SameCPUMemory(deferred.Status.ContainerStatuses[0].Resources, &want) {
		t.Errorf("deferred resize: Ready %v, resources %+v; want Ready with the resources it started with", podutil.IsPodReady(deferred), deferred.Status.ContainerStatuses[0].Resources)
	}
	if cond := podCondition(deferred, corev1.PodResizePending); cond.Message == "" {
		t.Errorf("PodResizePending without a message: %+v", cond)
	}

	// Asking for what the container runs with again ends the pending
	// resize; asking for less than the room left resizes it.
	for _, cpu := range []string{"100m", "200m"} {
		rv := resize(cpu)
		want = res(cpu)
		done := waitPod(t, ctx, pods, pod.Name, rv, resizedTo(want))
		if cond := podCondition(done, corev1.PodResizePending); cond != nil {
			t.Errorf("PodResizePending left after a resize to %s: %+v", cpu, cond)
		}
	}
}

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
	resize := func(pod *corev1.Pod, res corev1.ResourceRequirements) string {
		t.Helper()
		return patchPod(t, ctx, pods, pod.Name, resizePatch(res), "resize").ResourceVersion
	}
	done := func(want corev1.ResourceRequirements) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			return resizedTo(want)(p) && podCondition(p, corev1.PodResizePending) == nil
		}
	}

	guaranteed := runWithResources(t, ctx, pods, node, "guaranteed", cpuMemory("100m", "64Mi"))
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

	burstable := runWithResources(t, ctx, pods, node, "burstable", corev1.ResourceRequirements{
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

// runWithResources creates the pod name on node with one container, app,
// of resources res, and waits until it is Ready with app reporting them.
func runWithResources(t *testing.T, ctx context.Context, pods corev1client.PodInterface, node, name string, res corev1.ResourceRequirements) *corev1.Pod {
	t.Helper()
	pod := createOnFakeNode(t, ctx, pods, name, corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app:1", Resources: res}}})
	return waitPod(t, ctx, pods, pod.Name, "", func(p *corev1.Pod) bool {
		return podutil.IsPodReady(p) && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].Resources != nil &&
			podutil.SameCPUMemory(p.Status.ContainerStatuses[0].Resources, &res)
	})
}

// resizedTo holds once the container app's resize is done and it reports
// the resources want.
func resizedTo(want corev1.ResourceRequirements) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		state, _ := podutil.PodResizeState(p, []string{"app"})
		return state == podutil.ResizeDone && podutil.SameCPUMemory(p.Status.ContainerStatuses[0].Resources, &want)
	}
}

// resizePatch is the patch of the pod resize subresource that sets the
// container app's cpu and memory requests and limits to res.
func resizePatch(res corev1.ResourceRequirements) string {
	return fmt.Sprintf(`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":%q,"memory":%q},"limits":{"cpu":%q,"memory":%q}}}]}}`,
		res.Requests.Cpu(), res.Requests.Memory(), res.Limits.Cpu(), res.Limits.Memory())
}

// cpuMemory is a container's resources: requests and limits of cpu and mem.
func cpuMemory(cpu, mem string) corev1.ResourceRequirements {
	list := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
	return corev1.ResourceRequirements{Requests: list, Limits: list.DeepCopy()}
}

// podCondition is the pod's condition of type t, nil if it has none.
func podCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
