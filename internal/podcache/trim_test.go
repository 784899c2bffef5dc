package podcache

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// fullPod is a pod with every field family set, as the API server returns
// pods of a real workload.
func fullPod() *corev1.Pod {
	now := metav1.NewTime(time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC))
	always := corev1.ContainerRestartPolicyAlways
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-x7k2p", GenerateName: "web-", Namespace: "shop", UID: "u-1", ResourceVersion: "42", Generation: 1,
			CreationTimestamp: now, DeletionTimestamp: &now, DeletionGracePeriodSeconds: ptr.To[int64](30),
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{"apps.deckhand.dev/sidecarsets": "log", lastApplied: `{"huge":"copy"}`},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps.deckhand.dev/v1alpha1", Kind: "PodSet", Name: "web", UID: "o-1", Controller: ptr.To(true)}},
			Finalizers:      []string{"example.com/keep"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1",
			Containers: []corev1.Container{{
				Name: "app", Image: "nginx:1.27",
				Env:       []corev1.EnvVar{{Name: "A", Value: "b"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			}},
			InitContainers: []corev1.Container{{Name: "log", Image: "fluent-bit:3", RestartPolicy: &always, Args: []string{"-v"}}},
			Volumes:        []corev1.Volume{{Name: "token"}},
			Tolerations:    []corev1.Toleration{{Key: "node.kubernetes.io/not-ready"}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "r", Message: "m"},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred, Message: "m", LastTransitionTime: now},
				{Type: "apps.deckhand.dev/SidecarSetsUpdatable", Status: corev1.ConditionFalse, Reason: "NotUpdatableInPlace", Message: "SidecarSet log: why", LastTransitionTime: now, LastProbeTime: now},
			},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "app", Ready: true, Started: ptr.To(true), Image: "docker.io/library/nginx:1.27", ImageID: "sha256:1", RestartCount: 2,
				State:              corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
				Resources:          &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")}},
				AllocatedResources: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
			}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "log", Ready: true, Image: "fluent-bit:3", ImageID: "sha256:2", RestartCount: 1}},
			PodIP:                 "10.0.0.1",
			HostIP:                "192.168.0.1",
			QOSClass:              corev1.PodQOSBurstable,
		},
	}
}

// TestTrimKeeps pins the fields the controllers read: a controller that
// starts reading another pod field must add it to Trim and here.
func TestTrimKeeps(t *testing.T) {
	in := fullPod()
	out, err := Trim(in.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	always := corev1.ContainerRestartPolicyAlways
	want := &corev1.Pod{
		TypeMeta: in.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-x7k2p", GenerateName: "web-", Namespace: "shop", UID: "u-1", ResourceVersion: "42", Generation: 1,
			CreationTimestamp: in.CreationTimestamp, DeletionTimestamp: in.DeletionTimestamp, DeletionGracePeriodSeconds: ptr.To[int64](30),
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{"apps.deckhand.dev/sidecarsets": "log"},
			OwnerReferences: in.OwnerReferences,
			Finalizers:      []string{"example.com/keep"},
		},
		Spec: corev1.PodSpec{
			NodeName:       "node-1",
			Containers:     []corev1.Container{{Name: "app", Image: "nginx:1.27", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
			InitContainers: []corev1.Container{{Name: "log", Image: "fluent-bit:3", RestartPolicy: &always}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: in.Status.Conditions[1].LastTransitionTime},
				{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred, LastTransitionTime: in.Status.Conditions[1].LastTransitionTime},
				{Type: "apps.deckhand.dev/SidecarSetsUpdatable", Status: corev1.ConditionFalse, Reason: "NotUpdatableInPlace", Message: "SidecarSet log: why", LastTransitionTime: in.Status.Conditions[1].LastTransitionTime},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true, Started: ptr.To(true), Image: "docker.io/library/nginx:1.27", ImageID: "sha256:1", RestartCount: 2,
				Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "log", Ready: true, Image: "fluent-bit:3", ImageID: "sha256:2", RestartCount: 1}},
		},
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Fatalf("trimmed pod:\n got %+v\nwant %+v", got, want)
	}
}

func TestTrimLeavesOtherObjectsAlone(t *testing.T) {
	cm := &corev1.ConfigMap{Data: map[string]string{"a": "b"}}
	out, err := Trim(cm)
	if err != nil || out != any(cm) {
		t.Fatalf("Trim(ConfigMap) = %v, %v; want the same object", out, err)
	}
}

// TestTrimKeepsAnnotationsMapWithoutLastApplied: the common case shares the
// decoded map instead of copying it.
func TestTrimKeepsAnnotationsMapWithoutLastApplied(t *testing.T) {
	in := fullPod()
	delete(in.Annotations, lastApplied)
	out, _ := Trim(in)
	got := out.(*corev1.Pod)
	if len(got.Annotations) != 1 || got.Annotations["apps.deckhand.dev/sidecarsets"] != "log" {
		t.Fatalf("annotations = %v", got.Annotations)
	}
}
