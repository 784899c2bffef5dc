package localcluster

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// TestFakeNodeWaitsForReadinessProbeDelay starts a pod whose container has a
// readiness probe with initialDelaySeconds, then updates the container's
// image in place, and follows the pod from a watch as a kubelet reports it:
// each time the container runs (the new image after the update) but is not
// ready, and the pod is not Ready, until initialDelaySeconds after the
// container's startedAt; then both are ready.
func TestFakeNodeWaitsForReadinessProbeDelay(t *testing.T) {
	const delay = 3
	_, pods, ctx := fakeNodePods(t)
	pod := createOnFakeNode(t, ctx, pods, "probed", corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "app:1", ReadinessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
			InitialDelaySeconds: delay,
		}}},
	})
	rv := ""
	for _, image := range []string{"app:1", "app:2"} {
		if image != "app:1" {
			patch := `{"spec":{"containers":[{"name":"app","image":"` + image + `"}]}}`
			patched, err := pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rv = patched.ResourceVersion
		}
		var runningNotReady *corev1.ContainerStatus
		ready := waitPod(t, ctx, pods, pod.Name, rv, func(p *corev1.Pod) bool {
			if len(p.Status.ContainerStatuses) == 0 {
				return false
			}
			cs := p.Status.ContainerStatuses[0]
			if cs.Image != image || cs.State.Running == nil {
				return false
			}
			if !cs.Ready {
				if podutil.IsPodReady(p) {
					t.Fatalf("pod Ready while its container is not: %+v", p.Status)
				}
				runningNotReady = &cs
				return false
			}
			return podutil.IsPodReady(p)
		})
		seen := time.Now()
		if runningNotReady == nil {
			t.Fatalf("%s: the container was ready as soon as it ran, want not ready for %ds", image, delay)
		}
		started := ready.Status.ContainerStatuses[0].State.Running.StartedAt.Time
		if due := started.Add(delay * time.Second); seen.Before(due) {
			t.Errorf("%s: ready at %s, before startedAt %s + %ds", image, seen.Format(time.RFC3339Nano), started, delay)
		}
		rv = ready.ResourceVersion
	}
}
