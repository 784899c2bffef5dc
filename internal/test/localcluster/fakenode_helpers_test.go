package localcluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"
)

// fakeNode is the node of a cluster fakeNodePods starts.
const fakeNode = "kwok-node-0"

// fakeNodePods starts, for t, a cluster with one fake node and no
// scheduler: a pod names its node (createOnFakeNode). It returns the
// default namespace's pods and the context that bounds t's requests.
func fakeNodePods(t *testing.T) (*Cluster, corev1client.PodInterface, context.Context) {
	t.Helper()
	c, ctx := startCluster(t, Options{FakeNodes: 1})
	return c, c.Clientset().CoreV1().Pods(metav1.NamespaceDefault), ctx
}

// createOnFakeNode creates the pod name with spec, bound to fakeNode unless
// spec names another node.
func createOnFakeNode(t *testing.T, ctx context.Context, pods corev1client.PodInterface, name string, spec corev1.PodSpec) *corev1.Pod {
	t.Helper()
	if spec.NodeName == "" {
		spec.NodeName = fakeNode
	}
	pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// patchPod applies the strategic merge patch to the pod name (or to its
// subresource, "resize") and returns the pod as patched, whose
// resourceVersion a waitPod after the change starts from.
func patchPod(t *testing.T, ctx context.Context, pods corev1client.PodInterface, name, patch string, subresources ...string) *corev1.Pod {
	t.Helper()
	p, err := pods.Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, subresources...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// waitPod watches the pod from resourceVersion rv (empty: its current state)
// until done holds.
func waitPod(t *testing.T, ctx context.Context, pods corev1client.PodInterface, name, rv string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if rv == "" {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if done(p) {
			return p
		}
		rv = p.ResourceVersion
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: rv})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var last *corev1.Pod
	for ev := range w.ResultChan() {
		if p, ok := ev.Object.(*corev1.Pod); ok {
			last = p
			if done(p) {
				return p
			}
		}
	}
	t.Fatalf("pod %s: condition not reached within 60s; last status: %+v", name, last)
	return nil
}

// withInitAndSidecar is spec with, before its containers, a plain init
// container, init (init:1), and a native sidecar, sidecar, on sidecarImage.
func withInitAndSidecar(sidecarImage string, spec corev1.PodSpec) corev1.PodSpec {
	spec.InitContainers = []corev1.Container{
		{Name: "init", Image: "init:1"},
		{Name: "sidecar", Image: sidecarImage, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
	}
	return spec
}

// allStatuses is the status of each of the pod's containers, regular then
// init.
func allStatuses(p *corev1.Pod) []corev1.ContainerStatus {
	return append(append([]corev1.ContainerStatus(nil), p.Status.ContainerStatuses...), p.Status.InitContainerStatuses...)
}

// waitingReason is the reason the named container (regular or init) waits
// for, "" if it does not wait.
func waitingReason(p *corev1.Pod, name string) string {
	for _, cs := range allStatuses(p) {
		if cs.Name == name && cs.State.Waiting != nil {
			return cs.State.Waiting.Reason
		}
	}
	return ""
}

// containerStatus is the status of the named container (regular or init).
func containerStatus(t *testing.T, p *corev1.Pod, name string) corev1.ContainerStatus {
	t.Helper()
	for _, cs := range allStatuses(p) {
		if cs.Name == name {
			return cs
		}
	}
	t.Fatalf("pod %s reports no status for container %s", p.Name, name)
	return corev1.ContainerStatus{}
}
