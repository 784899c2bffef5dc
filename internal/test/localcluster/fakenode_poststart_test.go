package localcluster

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// TestFakeNodeRunsPostStartHooks starts a pod whose container has a
// postStart hook that sleeps, beside one without a hook, then updates the
// hooked container's image in place, following the pod from a watch as a
// kubelet reports it: each time the hooked container waits
// ContainerCreating, with the pod not Ready, and runs on its new image,
// with the pod Ready, no sooner than the hook's seconds after the request that started
// it; its restartCount is 0 after the first start and 1 after the update,
// and the other container runs untouched throughout.
func TestFakeNodeRunsPostStartHooks(t *testing.T) {
	const hook = 3
	_, pods, ctx := fakeNodePods(t)
	requested := time.Now()
	pod := createOnFakeNode(t, ctx, pods, "hooked", corev1.PodSpec{Containers: []corev1.Container{
		{Name: "app", Image: "app:1", Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: hook}}}},
		{Name: "other", Image: "other:1"},
	}})
	rv := ""
	for i, image := range []string{"app:1", "app:2"} {
		if i > 0 {
			requested = time.Now()
			patched, err := pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(`{"spec":{"containers":[{"name":"app","image":"app:2"}]}}`), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rv = patched.ResourceVersion
		}
		sawCreating := false
		running := waitPod(t, ctx, pods, pod.Name, rv, func(p *corev1.Pod) bool {
			if len(p.Status.ContainerStatuses) != 2 {
				return false
			}
			if other := containerStatus(t, p, "other"); other.State.Running == nil && sawCreating || other.RestartCount != 0 {
				t.Fatalf("container other stopped while app's hook ran: %+v", other)
			}
			if waitingReason(p, "app") == "ContainerCreating" {
				sawCreating = true
				if podutil.IsPodReady(p) {
					t.Fatalf("pod Ready while app's postStart hook runs: %+v", p.Status)
				}
				return false
			}
			app := containerStatus(t, p, "app")
			return sawCreating && app.Image == image && app.State.Running != nil && podutil.IsPodReady(p)
		})
		took := time.Since(requested)
		if took < hook*time.Second {
			t.Errorf("%s ran %s after the request, before its %ds postStart hook could return", image, took.Round(time.Millisecond), hook)
		}
		app := containerStatus(t, running, "app")
		if !app.Ready || app.RestartCount != int32(i) {
			t.Errorf("%s after its hook: ready %v, restartCount %d; want ready, %d", image, app.Ready, app.RestartCount, i)
		}
		rv = running.ResourceVersion
	}
}
