package sidecarset_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestInPlaceUpdateInitContainers rolls an image change of a native sidecar
// (an init container with restartPolicy Always) and of a plain init
// container out to running pods. Both spec images are patched in place
// (docs/sidecarset.md: a plain init container has already run, so only its
// spec changes matter to later restarts); the pods keep their UIDs, and
// the native sidecar is counted updated only once it reports the new image,
// ready.
func TestInPlaceUpdateInitContainers(t *testing.T) {
	ns := env.Namespace(t)
	name := "init-" + ns
	s := newSidecarSet(name, ns, "init", "proxy:1")
	s.Spec.Containers = nil
	s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{
		{Container: corev1.Container{Name: "setup", Image: "setup:1"}},
		{Container: corev1.Container{Name: "agent", Image: "agent:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
	}
	createSidecarSet(t, s)

	const n = 2
	uids := map[string]types.UID{}
	for _, p := range createPods(t, ns, "init", "pod-%d", n) {
		if initImage(p, "setup") != "setup:1" || initImage(p, "agent") != "agent:1" {
			t.Fatalf("pod %s not injected with both init containers: %+v", p.Name, p.Spec.InitContainers)
		}
		uids[p.Name] = p.UID
	}
	waitStatus(t, name, 60*time.Second, "2 pods matched, updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == n && s.Status.UpdatedReadyPods == n
	})

	s = updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.InitContainers[0].Image = "setup:2"
		s.Spec.InitContainers[1].Image = "agent:2"
	})
	newRevision, _ := sidecarcontrol.Hashes(&s.Spec)
	final := waitStatus(t, name, 90*time.Second, "both pods updated in place", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return s.Status.LatestRevision == newRevision && s.Status.UpdatedPods == s.Status.MatchedPods &&
			c != nil && c.Status == metav1.ConditionTrue
	})
	if st := final.Status; st.MatchedPods != n || st.NotUpdatablePods != 0 {
		t.Errorf("final status: %s", statusOf(&final))
	}

	// Read after the status said updated: the native sidecar's status must
	// already report the new image, ready, for the pod to have been counted.
	pods, err := listPods(ctxT(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != n {
		t.Fatalf("%d pods, want %d", len(pods), n)
	}
	for i := range pods {
		p := &pods[i]
		if p.UID != uids[p.Name] {
			t.Errorf("pod %s was recreated: UID %s, want %s", p.Name, p.UID, uids[p.Name])
		}
		if rev, _ := sidecarcontrol.ReadPodRecord(p.Annotations).Revisions(name); rev != newRevision {
			t.Errorf("pod %s records revision %s, want %s", p.Name, rev, newRevision)
		}
		if got := initImage(p, "agent"); got != "agent:2" {
			t.Errorf("pod %s: native sidecar spec image %s, want agent:2", p.Name, got)
		}
		if got := initImage(p, "setup"); got != "setup:2" {
			t.Errorf("pod %s: init container spec image %s, want setup:2", p.Name, got)
		}
		agent := containerStatus(p.Status.InitContainerStatuses, "agent")
		if agent == nil || !agent.Ready || !podutil.ImageMatches("agent:2", *agent) || agent.RestartCount < 1 {
			t.Errorf("pod %s: native sidecar status %+v, want agent:2, ready, restarted", p.Name, agent)
		}
		if c := containerImage(p, "app"); c != "app:1" {
			t.Errorf("pod %s: the app container changed to %s", p.Name, c)
		}
	}

	// A native sidecar that stops being ready (its readiness probe fails)
	// takes its pod out of updatedPods: the pod runs the latest revision
	// only while the sidecar does.
	markInitContainerNotReady(t, ns, "pod-1", "agent")
	waitStatus(t, name, 30*time.Second, "pod-1 no longer counted updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == n && s.Status.ReadyPods == n-1 && s.Status.UpdatedPods == n-1
	})
}

// markInitContainerNotReady sets the init container's ready false and the
// pod's Ready and ContainersReady conditions False, as a kubelet whose
// readiness probe of that native sidecar fails would.
func markInitContainerNotReady(t *testing.T, ns, pod, container string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pod}, p); err != nil {
			return false, err
		}
		st := containerStatus(p.Status.InitContainerStatuses, container)
		if st == nil {
			return false, fmt.Errorf("pod %s has no status for init container %s", pod, container)
		}
		st.Ready = false
		for i := range p.Status.Conditions {
			if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
				c.Status = corev1.ConditionFalse
			}
		}
		return true, env.Client.Status().Update(ctx, p)
	}, "init container %s of pod %s marked not ready", container, pod)
}

func initImage(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}
