package localcluster

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// pullFailure follows a container whose image cannot be pulled: once it
// stops running it must wait ErrImagePull, then ImagePullBackOff, with the
// pod never Ready and, when it backs off, in phase; the returned predicate
// holds once it backs off.
func pullFailure(t *testing.T, name string, phase corev1.PodPhase) func(*corev1.Pod) bool {
	stopped, sawErrImagePull := false, false
	return func(p *corev1.Pod) bool {
		reason := waitingReason(p, name)
		stopped = stopped || reason != "" || len(p.Status.ContainerStatuses) == 0
		if stopped && podutil.IsPodReady(p) {
			t.Fatalf("pod %s is Ready with container %s's image unpullable: %+v", p.Name, name, p.Status)
		}
		switch reason {
		case "ErrImagePull":
			sawErrImagePull = true
		case "ImagePullBackOff":
			if !sawErrImagePull {
				t.Fatalf("container %s backs off without ErrImagePull first", name)
			}
			if p.Status.Phase != phase {
				t.Fatalf("pod %s in phase %s, want %s", p.Name, p.Status.Phase, phase)
			}
			return true
		}
		return false
	}
}

// TestFakeNodeFailsUnpullableImages starts pods whose regular container,
// plain init container or native sidecar names an image on
// UnpullableRegistry, and updates a running container to such an image,
// following each pod from a watch as a kubelet reports it: the container
// waits ErrImagePull, then ImagePullBackOff, and the pod is never Ready (at
// start it stays Pending; an init container or sidecar that cannot start
// keeps the containers after it waiting PodInitializing). An in-place update
// leaves the pod Running with the container waiting on the new image and
// its previous run in lastState. Naming a pullable image again starts the
// container and the pod turns Ready.
func TestFakeNodeFailsUnpullableImages(t *testing.T) {
	_, pods, ctx := fakeNodePods(t)
	bad := UnpullableImage("team/app:1")
	if !strings.HasPrefix(bad, "deckhand.invalid/") {
		t.Fatalf("UnpullableImage gives %q", bad)
	}

	t.Run("at start", func(t *testing.T) {
		cases := map[string]struct {
			init, containers []corev1.Container
			failing          string
			initializing     []string
		}{
			"container": {
				containers: []corev1.Container{{Name: "app", Image: bad}, {Name: "other", Image: "other:1"}},
				failing:    "app",
			},
			"init-container": {
				init:         []corev1.Container{{Name: "init", Image: bad}, {Name: "later", Image: "later:1"}},
				containers:   []corev1.Container{{Name: "app", Image: "app:1"}},
				failing:      "init",
				initializing: []string{"later", "app"},
			},
			"sidecar": {
				init:         []corev1.Container{{Name: "sidecar", Image: bad, RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
				containers:   []corev1.Container{{Name: "app", Image: "app:1"}},
				failing:      "sidecar",
				initializing: []string{"app"},
			},
		}
		for name, tc := range cases {
			pod := createOnFakeNode(t, ctx, pods, "start-"+name, corev1.PodSpec{InitContainers: tc.init, Containers: tc.containers})
			backoff := waitPod(t, ctx, pods, pod.Name, "", pullFailure(t, tc.failing, corev1.PodPending))
			cs := containerStatus(t, backoff, tc.failing)
			if cs.Image != bad || cs.ImageID != "" || cs.Ready || !strings.Contains(cs.State.Waiting.Message, bad) {
				t.Errorf("%s: container %s: %+v, want waiting on %s with no imageID", name, tc.failing, cs, bad)
			}
			for _, later := range tc.initializing {
				if reason := waitingReason(backoff, later); reason != "PodInitializing" {
					t.Errorf("%s: container %s waits %q, want PodInitializing", name, later, reason)
				}
			}
			initialized := true
			for _, cond := range backoff.Status.Conditions {
				if cond.Type == corev1.PodInitialized {
					initialized = cond.Status == corev1.ConditionTrue
				}
			}
			if initialized != (len(tc.initializing) == 0) {
				t.Errorf("%s: Initialized %v, want %v", name, initialized, len(tc.initializing) == 0)
			}

			// The pull failure is fixed: the pod starts.
			field := "containers"
			if len(tc.initializing) > 0 {
				field = "initContainers"
			}
			fix := fmt.Sprintf(`{"spec":{%q:[{"name":%q,"image":"fixed:1"}]}}`, field, tc.failing)
			patchPod(t, ctx, pods, pod.Name, fix)
			started := waitPod(t, ctx, pods, pod.Name, "", podutil.IsPodReady)
			if started.Status.Phase != corev1.PodRunning {
				t.Errorf("%s: fixed pod in phase %s, want Running", name, started.Status.Phase)
			}
			for _, cond := range started.Status.Conditions {
				if cond.Status == corev1.ConditionTrue && cond.Reason != "" {
					t.Errorf("%s: fixed pod's condition %s True with reason %q, want none", name, cond.Type, cond.Reason)
				}
			}
			if cs := containerStatus(t, started, tc.failing); cs.Image != "fixed:1" || cs.ImageID == "" {
				t.Errorf("%s: fixed container %+v, want it running fixed:1 with an imageID", name, cs)
			}
		}
	})

	t.Run("in-place update", func(t *testing.T) {
		pod := createOnFakeNode(t, ctx, pods, "update", corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "sidecar", Image: "sidecar:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
			Containers:     []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "other", Image: "other:1"}},
		})
		ready := waitPod(t, ctx, pods, pod.Name, "", podutil.IsPodReady)
		for _, name := range []string{"app", "sidecar"} {
			field := "containers"
			if name == "sidecar" {
				field = "initContainers"
			}
			image := UnpullableImage(name + ":2")
			patched := patchPod(t, ctx, pods, pod.Name, fmt.Sprintf(`{"spec":{%q:[{"name":%q,"image":%q}]}}`, field, name, image))
			backoff := waitPod(t, ctx, pods, pod.Name, patched.ResourceVersion, pullFailure(t, name, corev1.PodRunning))
			cs := containerStatus(t, backoff, name)
			before := containerStatus(t, ready, name)
			if cs.Image != image || cs.ImageID != "" || cs.Ready || cs.RestartCount != before.RestartCount || cs.LastTerminationState.Terminated == nil {
				t.Errorf("container %s after the update: %+v, want waiting on %s, its previous run in lastState", name, cs, image)
			}
			if other := containerStatus(t, backoff, "other"); !other.Ready || other.RestartCount != 0 {
				t.Errorf("container other: %+v, want it running untouched", other)
			}

			// Back to a pullable image: the container runs it, the pod is Ready.
			fixed := patchPod(t, ctx, pods, pod.Name, fmt.Sprintf(`{"spec":{%q:[{"name":%q,"image":%q}]}}`, field, name, name+":3"))
			ready = waitPod(t, ctx, pods, pod.Name, fixed.ResourceVersion, func(p *corev1.Pod) bool {
				cs := containerStatus(t, p, name)
				return podutil.IsPodReady(p) && cs.Image == name+":3" && cs.State.Running != nil
			})
			if cs := containerStatus(t, ready, name); cs.RestartCount != before.RestartCount+1 || !strings.Contains(cs.ImageID, "@sha256:") {
				t.Errorf("container %s after the fix: %+v, want one restart more than %d and an imageID", name, cs, before.RestartCount)
			}
			for _, cond := range ready.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Reason != "" {
					t.Errorf("pod Ready with reason %q, want none", cond.Reason)
				}
			}
		}
	})
}
