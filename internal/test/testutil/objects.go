package testutil

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// Deployment is a Deployment of replicas pods labelled labels (its
// selector too) running containers; tests set the rest on the result.
func Deployment(ns, name string, replicas int32, labels map[string]string, containers ...corev1.Container) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: containers},
			},
		},
	}
}

// PodSet is a PodSet of replicas pods labelled labels (its selector too)
// running containers; tests set the rest on the result. Its spec's
// replicas, selector and template are those of the same Deployment.
func PodSet(ns, name string, replicas int32, labels map[string]string, containers ...corev1.Container) *deckhandv1alpha1.PodSet {
	d := Deployment(ns, name, replicas, labels, containers...)
	return &deckhandv1alpha1.PodSet{
		ObjectMeta: d.ObjectMeta,
		Spec:       deckhandv1alpha1.PodSetSpec{Replicas: d.Spec.Replicas, Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
}

// LivePods lists the pods of ns matching labels that are not being deleted.
func LivePods(ctx context.Context, c client.Client, ns string, labels map[string]string) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels(labels)); err != nil {
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

// WaitReadyPods waits until ns has exactly n live pods labelled labels, all
// of them Ready, and returns them.
func WaitReadyPods(t testing.TB, c client.Client, ns string, labels map[string]string, n int) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = LivePods(ctx, c, ns, labels); err != nil || len(pods) != n {
			return false, err
		}
		for i := range pods {
			if !podutil.IsPodReady(&pods[i]) {
				return false, nil
			}
		}
		return true, nil
	}, "%d live pods labelled %v in %s, all of them Ready", n, labels, ns)
	return pods
}

// LargePod is a pod (of no namespace yet) of a ReplicaSet with 10
// containers and the env, mounts, probes and resources a real workload has:
// what the benchmarks of pod admission read and inject into.
func LargePod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "web-7d9f8b6c5-",
		Labels:       map[string]string{"app": "web", "pod-template-hash": "7d9f8b6c5", "tier": "frontend"},
		Annotations:  map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d9f8b6c5",
			UID: "0b1a8e7c-4f0e-4a55-9d8e-2a0f3c1b9e77", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
	}}
	for i := 0; i < 10; i++ {
		c := corev1.Container{
			Name:  fmt.Sprintf("app-%d", i),
			Image: fmt.Sprintf("registry.example.com/team/app-%d:v1.2.3", i),
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(8080 + i), Protocol: corev1.ProtocolTCP}},
			Env: []corev1.EnvVar{
				{Name: "LOG_LEVEL", Value: "info"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
				{Name: "CONFIG_PATH", Value: "/etc/app/config.yaml"},
			},
			VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: fmt.Sprintf("/etc/app-%d", i)}, {Name: "logs", MountPath: fmt.Sprintf("/var/log/app-%d", i)}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt(8080 + i)}},
				PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy: corev1.PullIfNotPresent,
		}
		p.Spec.Containers = append(p.Spec.Containers, c)
	}
	p.Spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}},
		{Name: "logs", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	return p
}

// ClosedGates lists, sorted, the names of the pods c holds whose in-place
// update gate is closed (inplacegate.Closed).
func ClosedGates(ctx context.Context, t testing.TB, c client.Reader) []string {
	t.Helper()
	var list corev1.PodList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := range list.Items {
		if inplacegate.Closed(&list.Items[i]) {
			out = append(out, list.Items[i].Name)
		}
	}
	slices.Sort(out)
	return out
}
