package podcache

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
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
			Annotations:     map[string]string{"apps.deckhand.dev/sidecarsets": "log", lastApplied: `{"huge":"copy"}`, "example.com/notes": "the owner's"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps.deckhand.dev/v1alpha1", Kind: "PodSet", Name: "web", UID: "o-1", Controller: ptr.To(true)}},
			Finalizers:      []string{"example.com/keep"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1",
			// What the API server defaults on every pod.
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: corev1.DefaultSchedulerName,
			Containers: []corev1.Container{{
				Name: "app", Image: "nginx:1.27",
				Env:       []corev1.EnvVar{{Name: "A", Value: "b"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
			}},
			InitContainers: []corev1.Container{{Name: "log", Image: "fluent-bit:3", RestartPolicy: &always, Args: []string{"-v"}}},
			Volumes:        []corev1.Volume{{Name: "token"}},
			Tolerations:    []corev1.Toleration{{Key: "node.kubernetes.io/not-ready"}},
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}, {ConditionType: inplacegate.ConditionType}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "r", Message: "m"},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred, Message: "m", LastTransitionTime: now},
				{Type: "apps.deckhand.dev/SidecarSetsUpdatable", Status: corev1.ConditionFalse, Reason: "NotUpdatableInPlace", Message: "SidecarSet log: why", LastTransitionTime: now, LastProbeTime: now},
				{Type: inplacegate.ConditionType, Status: corev1.ConditionFalse, Reason: inplacegate.ReasonUpdating, Message: "m", LastTransitionTime: now},
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
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: inplacegate.ConditionType}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: in.Status.Conditions[1].LastTransitionTime},
				{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred, LastTransitionTime: in.Status.Conditions[1].LastTransitionTime},
				{Type: "apps.deckhand.dev/SidecarSetsUpdatable", Status: corev1.ConditionFalse, Reason: "NotUpdatableInPlace", Message: "SidecarSet log: why", LastTransitionTime: in.Status.Conditions[1].LastTransitionTime},
				{Type: inplacegate.ConditionType, Status: corev1.ConditionFalse, Message: "m", LastTransitionTime: in.Status.Conditions[1].LastTransitionTime},
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

// TestTrimKeepsReadAnnotations pins the annotations a controller reads
// from a cached pod, by the API's names for them: those and no other are
// kept, within maxReadAnnotationBytes. A controller that starts reading
// another pod annotation must add it to readAnnotations and here.
func TestTrimKeepsReadAnnotations(t *testing.T) {
	big := strings.Repeat("x", 200<<10)
	cases := map[string]struct {
		annotations map[string]string
		want        map[string]string
	}{
		"every annotation a controller reads": {
			annotations: map[string]string{
				deckhandv1alpha1.SidecarSetInjectedAnnotation:                   "log",
				deckhandv1alpha1.SidecarSetHashAnnotation:                       `{"log":{"hash":"1f"}}`,
				deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation:           `{"log":{"hash":"9c"}}`,
				deckhandv1alpha1.SidecarSetSkipInjectionAnnotation:              "true",
				deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation: `{"log":"log-1"}`,
				deckhandv1alpha1.SidecarSetResizeAnnotation:                     `{}`,
				deckhandv1alpha1.SidecarSetVersionAnnotationPrefix + "log-1":    "3",
				deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix + "log-2": "2",
				deckhandv1alpha1.PodSetInPlaceHashAnnotation:                    "5d",
				deckhandv1alpha1.PodSetInPlaceUpdateAnnotation:                  `{"revision":"web-5d"}`,
				deckhandv1alpha1.PodDeletionCostAnnotation:                      "-10",
			},
		},
		"kubectl's copy, the owner's, and those Deckhand sets on other kinds": {
			annotations: map[string]string{
				lastApplied:                                     `{"huge":"copy"}`,
				"example.com/blob":                              big,
				deckhandv1alpha1.RestartedAtAnnotation:          "2026-11-27T03:00:00Z",
				deckhandv1alpha1.RestartScheduleAnnotation:      "0 3 * * *",
				deckhandv1alpha1.WebServerAppliedHashAnnotation: "ab",
			},
			want: map[string]string{},
		},
		"a read annotation too large to be Deckhand's": {
			annotations: map[string]string{
				deckhandv1alpha1.SidecarSetInjectedAnnotation: "log",
				deckhandv1alpha1.SidecarSetHashAnnotation:     big,
				"example.com/blob":                            "x",
			},
			want: map[string]string{deckhandv1alpha1.SidecarSetInjectedAnnotation: "log"},
		},
		"read annotations just within the budget": {
			annotations: map[string]string{
				deckhandv1alpha1.SidecarSetHashAnnotation: strings.Repeat("x", maxReadAnnotationBytes-len(deckhandv1alpha1.SidecarSetHashAnnotation)),
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := fullPod()
			in.Annotations = tc.annotations
			out, err := Trim(in)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == nil {
				want = tc.annotations
			}
			if got := out.(*corev1.Pod).Annotations; !apiequality.Semantic.DeepEqual(got, want) {
				t.Fatalf("kept annotations %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
			}
		})
	}
}

// TestTrimReturnsATrimmedPodAsIs: an informer streaming its initial list
// transforms each pod twice; the second time costs nothing.
func TestTrimReturnsATrimmedPodAsIs(t *testing.T) {
	once, _ := Trim(fullPod())
	twice, _ := Trim(once)
	if twice != once {
		t.Fatal("a trimmed pod was trimmed anew")
	}
	// A pod without the fields the API server defaults is a trimmed one;
	// any pod with one of them is trimmed.
	for _, change := range []func(*corev1.Pod){
		func(p *corev1.Pod) { p.Spec.RestartPolicy = "" },
		func(p *corev1.Pod) { p.Spec.DNSPolicy = "" },
		func(p *corev1.Pod) { p.Spec.SchedulerName = "" },
	} {
		p := fullPod()
		change(p)
		if out, _ := Trim(p); out == any(p) {
			t.Fatal("a pod with some of its defaulted fields was not trimmed")
		}
	}
}

// ownTrim is Trim without sharing: what every pod would hold if none of
// its values were shared.
func ownTrim(in *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		TypeMeta: in.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: in.Name, GenerateName: in.GenerateName, Namespace: in.Namespace, UID: in.UID,
			ResourceVersion: in.ResourceVersion, Generation: in.Generation, CreationTimestamp: in.CreationTimestamp,
			DeletionTimestamp: in.DeletionTimestamp, DeletionGracePeriodSeconds: in.DeletionGracePeriodSeconds,
			Labels: in.Labels, Annotations: map[string]string{}, OwnerReferences: in.OwnerReferences, Finalizers: in.Finalizers,
		},
		Spec: corev1.PodSpec{NodeName: in.Spec.NodeName, ReadinessGates: trimReadinessGates(in.Spec.ReadinessGates)},
		Status: corev1.PodStatus{
			Phase:      in.Status.Phase,
			Conditions: trimConditions(in.Status.Conditions),
		},
	}
	for k, v := range in.Annotations {
		if isReadAnnotation(k) {
			out.Annotations[k] = v
		}
	}
	if len(in.Spec.Containers) > 0 {
		out.Spec.Containers = ownContainers(in.Spec.Containers)
	}
	if len(in.Spec.InitContainers) > 0 {
		out.Spec.InitContainers = ownContainers(in.Spec.InitContainers)
	}
	if len(in.Status.ContainerStatuses) > 0 {
		out.Status.ContainerStatuses = ownStatuses(in.Status.ContainerStatuses)
	}
	if len(in.Status.InitContainerStatuses) > 0 {
		out.Status.InitContainerStatuses = ownStatuses(in.Status.InitContainerStatuses)
	}
	return out
}

// Two annotations the cache keeps, for the variants of TestSharedEqualsOwn.
const (
	versionA = "version.sidecarset.apps.deckhand.dev/a"
	versionB = "version.sidecarset.apps.deckhand.dev/b"
)

// TestSharedEqualsOwn: pods that differ in any one kept field never share
// that field's value, so every trimmed pod equals its own trim however
// many similar pods were trimmed before it.
func TestSharedEqualsOwn(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	variants := []struct {
		name   string
		change func(p *corev1.Pod)
	}{
		{"as is", func(*corev1.Pod) {}},
		{"label value", func(p *corev1.Pod) { p.Labels["app"] = "api" }},
		{"label added", func(p *corev1.Pod) { p.Labels["tier"] = "front" }},
		{"label key and value run together", func(p *corev1.Pod) { p.Labels = map[string]string{"ap": "pweb"} }},
		{"annotation value", func(p *corev1.Pod) { p.Annotations["apps.deckhand.dev/sidecarsets"] = "log,mesh" }},
		// Annotation values may hold any byte, a separator included.
		{"two annotations", func(p *corev1.Pod) { p.Annotations = map[string]string{versionA: "x", versionB: "c"} }},
		{"one annotation spelling two", func(p *corev1.Pod) { p.Annotations = map[string]string{versionA: "x\x00" + versionB + "\x00c"} }},
		{"one annotation spelling two with lengths", func(p *corev1.Pod) {
			p.Annotations = map[string]string{versionA: fmt.Sprintf("x%d:%s1:c", len(versionB), versionB)}
		}},
		{"owner name", func(p *corev1.Pod) { p.OwnerReferences[0].Name = "api" }},
		{"owner uid", func(p *corev1.Pod) { p.OwnerReferences[0].UID = "o-2" }},
		{"owner not controller", func(p *corev1.Pod) { p.OwnerReferences[0].Controller = ptr.To(false) }},
		{"owner controller unset", func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }},
		{"owner blocks deletion", func(p *corev1.Pod) { p.OwnerReferences[0].BlockOwnerDeletion = ptr.To(true) }},
		{"owner kind", func(p *corev1.Pod) { p.OwnerReferences[0].Kind = "ReplicaSet" }},
		{"owner apiVersion", func(p *corev1.Pod) { p.OwnerReferences[0].APIVersion = "apps/v1" }},
		{"container name", func(p *corev1.Pod) { p.Spec.Containers[0].Name = "web" }},
		{"container image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx:1.28" }},
		{"container restartPolicy", func(p *corev1.Pod) { p.Spec.Containers[0].RestartPolicy = &always }},
		{"init container restartPolicy unset", func(p *corev1.Pod) { p.Spec.InitContainers[0].RestartPolicy = nil }},
		{"container cpu request", func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = list("cpu", "200m") }},
		{"container cpu as limit", func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Limits: list("cpu", "100m")}
		}},
		{"container memory limit", func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = list("memory", "1Gi") }},
		{"container restartPolicy empty", func(p *corev1.Pod) { p.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicy("")) }},
		{"status memory limit", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Resources.Limits = list("memory", "1Gi") }},
		{"container memory", func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = list("cpu", "100m", "memory", "1Gi") }},
		{"second container", func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "log", Image: "fluent-bit:3"})
		}},
		{"status ready", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Ready = false }},
		{"status started", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Started = ptr.To(false) }},
		{"status started unset", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Started = nil }},
		{"status image", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Image = "docker.io/library/nginx:1.28" }},
		{"status imageID", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].ImageID = "sha256:3" }},
		{"status restartCount", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = 3 }},
		{"status name", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Name = "web" }},
		{"status resources unset", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Resources = nil }},
		{"status resources empty", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{} }},
		{"status cpu", func(p *corev1.Pod) {
			p.Status.ContainerStatuses[0].Resources = &corev1.ResourceRequirements{Requests: list("cpu", "300m")}
		}},
		{"init status ready", func(p *corev1.Pod) { p.Status.InitContainerStatuses[0].Ready = false }},
		{"no in-place update gate", func(p *corev1.Pod) { p.Spec.ReadinessGates = p.Spec.ReadinessGates[:1] }},
	}
	pods := make([]*corev1.Pod, len(variants))
	for i, v := range variants {
		pods[i] = fullPod()
		pods[i].DeletionTimestamp = nil
		v.change(pods[i])
	}
	// Every variant is trimmed twice: first beside all the others, so that
	// a value shared under too coarse a key shows up in the second round.
	for round := 0; round < 2; round++ {
		for i, v := range variants {
			out, err := Trim(pods[i].DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if want := ownTrim(pods[i]); !apiequality.Semantic.DeepEqual(out, want) {
				t.Fatalf("round %d, %s: trimmed pod\n got %+v\nwant %+v", round, v.name, out, want)
			}
		}
	}
}

// TestTrimShares: two pods of one template hold one copy of what they
// have alike.
func TestTrimShares(t *testing.T) {
	a, _ := Trim(fullPod())
	b, _ := Trim(fullPod())
	pa, pb := a.(*corev1.Pod), b.(*corev1.Pod)
	if &pa.Spec.Containers[0] != &pb.Spec.Containers[0] || &pa.Spec.InitContainers[0] != &pb.Spec.InitContainers[0] {
		t.Error("containers are not shared")
	}
	if &pa.Status.ContainerStatuses[0] != &pb.Status.ContainerStatuses[0] {
		t.Error("container statuses are not shared")
	}
	if &pa.OwnerReferences[0] != &pb.OwnerReferences[0] {
		t.Error("owner references are not shared")
	}
	if reflect.ValueOf(pa.Labels).UnsafePointer() != reflect.ValueOf(pb.Labels).UnsafePointer() ||
		reflect.ValueOf(pa.Annotations).UnsafePointer() != reflect.ValueOf(pb.Annotations).UnsafePointer() {
		t.Error("labels or annotations are not shared")
	}
	if pa == pb {
		t.Fatal("the pods themselves are one")
	}
}

// BenchmarkTrim is the cost the informer pays per pod event.
func BenchmarkTrim(b *testing.B) {
	pod := fullPod()
	pod.Spec.Containers = append(pod.Spec.Containers,
		corev1.Container{Name: "b", Image: "busybox:1.36", Resources: corev1.ResourceRequirements{Requests: list("cpu", "50m", "memory", "64Mi")}},
		corev1.Container{Name: "c", Image: "busybox:1.36", Resources: corev1.ResourceRequirements{Requests: list("cpu", "50m")}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Trim(pod); err != nil {
			b.Fatal(err)
		}
	}
}
