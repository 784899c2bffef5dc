package sidecarset_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// The tests of this file are about what a change of a SidecarSet does to
// the pods already running: which changes are patched in place, into which
// pods, and which wait for the pods to be recreated.

// TestNotUpdate checks updateStrategy.type NotUpdate: an image change
// leaves running pods on their sidecar image and revision, the status counts
// them as not updated and says why, and pods created afterwards are injected
// with the new image.
func TestNotUpdate(t *testing.T) {
	sc := newScenario(t, "keep", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Type = deckhandv1alpha1.NotUpdateSidecarSetStrategy
	})
	name := sc.name

	uids := uidsByName(sc.createPods("pod-%d", 2))
	before := sc.waitUpdatedReady(60*time.Second, 2)
	oldRevision := before.Status.LatestRevision

	s := sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "proxy:2" })
	newRevision, _ := sidecarcontrol.Hashes(&s.Spec)
	sc.waitStatus(30*time.Second, "the new revision reported with no pod updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return s.Status.LatestRevision == newRevision && s.Status.MatchedPods == 2 && s.Status.UpdatedPods == 0 &&
			c != nil && c.Reason == "NotUpdate"
	})

	// A new pod is injected with the new image. Its reconcile comes after
	// the one that saw the image change, so by the time the status counts
	// it, any update the controller would (wrongly) have made to the old
	// pods has been written.
	fresh := sc.create(sc.pod("fresh"))
	if img := containerImage(fresh, "proxy"); img != "proxy:2" {
		t.Fatalf("a pod created after the image change was injected with %q, want proxy:2", img)
	}
	if rev, _ := sidecarcontrol.ReadPodRecord(fresh.Annotations).Revisions(name); rev != newRevision {
		t.Errorf("the new pod records revision %s, want %s", rev, newRevision)
	}
	after := sc.waitStatus(60*time.Second, "3 pods matched and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 3 && s.Status.ReadyPods == 3
	})
	if after.Status.UpdatedPods != 1 {
		t.Errorf("updatedPods = %d, want 1 (only the new pod): %s", after.Status.UpdatedPods, statusOf(&after))
	}
	if c := condition(after, deckhandv1alpha1.SidecarSetPodsUpdatedCondition); c == nil || c.Reason != "NotUpdate" {
		t.Errorf("PodsUpdated = %+v, want reason NotUpdate", c)
	}

	pods := sc.pods()
	for i := range pods {
		p := &pods[i]
		if p.Name == "fresh" {
			continue
		}
		wantNotRecreated(t, p, uids)
		if img := containerImage(p, "proxy"); img != "proxy:1" {
			t.Errorf("pod %s: sidecar spec image %s, want proxy:1 under NotUpdate", p.Name, img)
		}
		if rev, _ := sidecarcontrol.ReadPodRecord(p.Annotations).Revisions(name); rev != oldRevision {
			t.Errorf("pod %s records revision %s, want the old %s", p.Name, rev, oldRevision)
		}
		if st := podutil.FindStatus(p.Status.ContainerStatuses, "proxy"); st == nil || !podutil.ImageMatches("proxy:1", *st) || st.RestartCount != 0 {
			t.Errorf("pod %s: sidecar status %+v, want proxy:1 never restarted", p.Name, st)
		}
	}
}

// TestNonImageChangesAndUpdateSelector checks that only image changes roll
// out in place, only to the pods updateStrategy.selector picks, and that a
// non-image change is reported rather than applied.
func TestNonImageChangesAndUpdateSelector(t *testing.T) {
	sc := newScenario(t, "scope")
	for i := 0; i < 4; i++ {
		p := sc.pod(fmt.Sprintf("pod-%d", i))
		if i < 2 {
			p.Labels["canary"] = "true"
		}
		sc.create(p)
	}
	sc.waitStatus(60*time.Second, "4 pods updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.UpdatedReadyPods == 4
	})
	// Image change limited to canary pods.
	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "proxy:2"
		s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
	})
	sc.waitStatus(60*time.Second, "the 2 canary pods updated, the rest held", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return s.Status.UpdatedPods == 2 && c != nil && c.Reason == "UpdateHeld"
	})
	pods := sc.pods()
	for i := range pods {
		want := "proxy:1"
		if pods[i].Labels["canary"] == "true" {
			want = "proxy:2"
		}
		if got := containerImage(&pods[i], "proxy"); got != want {
			t.Errorf("pod %s runs %s, want %s", pods[i].Name, got, want)
		}
	}

	// A non-image change: nothing is patched; the status says why.
	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Selector = nil
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "strict"}}
	})
	s := sc.waitStatus(60*time.Second, "the non-image change is reported", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetInPlaceUpdatableCondition)
		return s.Status.NotUpdatablePods == 4 && s.Status.UpdatedPods == 0 && c != nil && c.Status == metav1.ConditionFalse && c.Reason == "NonImageChanges"
	})
	t.Logf("InPlaceUpdatable: %s", condition(s, deckhandv1alpha1.SidecarSetInPlaceUpdatableCondition).Message)
	pods = sc.pods()
	for i := range pods {
		for _, c := range pods[i].Spec.Containers {
			if c.Name == "proxy" && len(c.Env) != 0 {
				t.Errorf("pod %s was changed beyond its image: %v", pods[i].Name, c.Env)
			}
		}
	}
	// A new pod gets the new revision.
	p := sc.create(sc.pod("fresh"))
	for _, c := range p.Spec.Containers {
		if c.Name == "proxy" && (len(c.Env) != 1 || c.Image != "proxy:2") {
			t.Errorf("a new pod did not get the latest revision: %+v", c)
		}
	}
}

// TestInPlaceUpdateInitContainers changes the image of a plain init
// container, then of a native sidecar (an init container with
// restartPolicy Always) of a SidecarSet with running pods. A plain init
// container ran once and a kubelet never runs it again: its change reaches
// only new pods, the running pods' specs and records are left as they were,
// and they count as updated at once (docs/sidecarset.md, "Init
// containers"). A native sidecar's image is patched in place; the pods keep
// their UIDs, keep the plain init container's old image, and count as
// updated only once the native sidecar reports the new image, ready.
func TestInPlaceUpdateInitContainers(t *testing.T) {
	sc := newScenario(t, "init", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers = nil
		s.Spec.InitContainers = []deckhandv1alpha1.SidecarContainer{
			{Container: corev1.Container{Name: "setup", Image: "setup:1"}},
			{Container: corev1.Container{Name: "agent", Image: "agent:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
		}
	})
	name := sc.name

	const n = 2
	created := sc.createPods("pod-%d", n)
	for _, p := range created {
		if initImage(p, "setup") != "setup:1" || initImage(p, "agent") != "agent:1" {
			t.Fatalf("pod %s not injected with both init containers: %+v", p.Name, p.Spec.InitContainers)
		}
	}
	uids := uidsByName(created)
	first := sc.waitUpdatedReady(60*time.Second, n)
	firstRevision := first.Status.LatestRevision
	running := map[string]*corev1.Pod{}
	for _, p := range sc.pods() {
		running[p.Name] = p.DeepCopy()
	}

	// A plain init container's image: new pods only.
	s := sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InitContainers[0].Image = "setup:2" })
	setupRevision, _ := sidecarcontrol.Hashes(&s.Spec)
	sc.waitStatus(60*time.Second, "the new revision reported with every pod counted updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return s.Status.LatestRevision == setupRevision && s.Status.MatchedPods == n && s.Status.UpdatedPods == n &&
			s.Status.NotUpdatablePods == 0 && c != nil && c.Status == metav1.ConditionTrue
	})
	// A pod created now gets the new image. Its reconcile comes after the one
	// that saw the change, so once the status counts it any patch the
	// controller would (wrongly) have made to the running pods is written.
	fresh := sc.create(sc.pod("fresh"))
	if got := initImage(fresh, "setup"); got != "setup:2" {
		t.Fatalf("a pod created after the change was injected with setup image %q, want setup:2", got)
	}
	sc.waitUpdatedReady(60*time.Second, n+1)
	for _, p := range sc.pods() {
		if p.Name == "fresh" {
			continue
		}
		before := running[p.Name]
		if !apiequality.Semantic.DeepEqual(p.Spec, before.Spec) {
			t.Errorf("pod %s: spec changed by a plain init container change (setup image %s, was %s)", p.Name, initImage(&p, "setup"), initImage(before, "setup"))
		}
		if rev, _ := sidecarcontrol.ReadPodRecord(p.Annotations).Revisions(name); rev != firstRevision {
			t.Errorf("pod %s records revision %s, want its own %s", p.Name, rev, firstRevision)
		}
	}

	// A native sidecar's image (and the plain init container's again): the
	// native sidecar is updated in place, the plain init container is not.
	s = sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.InitContainers[0].Image = "setup:3"
		s.Spec.InitContainers[1].Image = "agent:2"
	})
	newRevision, _ := sidecarcontrol.Hashes(&s.Spec)
	final := sc.waitStatus(90*time.Second, "every pod updated in place", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return s.Status.LatestRevision == newRevision && s.Status.UpdatedPods == s.Status.MatchedPods &&
			c != nil && c.Status == metav1.ConditionTrue
	})
	if st := final.Status; st.MatchedPods != n+1 || st.NotUpdatablePods != 0 {
		t.Errorf("final status: %s", statusOf(&final))
	}

	// Read after the status said updated: the native sidecar's status must
	// already report the new image, ready, for the pod to have been counted.
	pods := sc.pods()
	if len(pods) != n+1 {
		t.Fatalf("%d pods, want %d", len(pods), n+1)
	}
	for i := range pods {
		p := &pods[i]
		wantSetup := "setup:1"
		if p.Name == "fresh" {
			wantSetup = "setup:2"
		} else {
			wantNotRecreated(t, p, uids)
		}
		if rev, _ := sidecarcontrol.ReadPodRecord(p.Annotations).Revisions(name); rev != newRevision {
			t.Errorf("pod %s records revision %s, want %s", p.Name, rev, newRevision)
		}
		if got := initImage(p, "agent"); got != "agent:2" {
			t.Errorf("pod %s: native sidecar spec image %s, want agent:2", p.Name, got)
		}
		if got := initImage(p, "setup"); got != wantSetup {
			t.Errorf("pod %s: plain init container spec image %s, want %s (never patched in place)", p.Name, got, wantSetup)
		}
		agent := podutil.FindStatus(p.Status.InitContainerStatuses, "agent")
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
	sc.markInitContainerNotReady("pod-1", "agent")
	sc.waitStatus(30*time.Second, "pod-1 no longer counted updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == n+1 && s.Status.ReadyPods == n && s.Status.UpdatedPods == n
	})
}

// markInitContainerNotReady sets the init container's ready false and the
// pod's Ready and ContainersReady conditions False, as a kubelet whose
// readiness probe of that native sidecar fails would.
func (sc *scenario) markInitContainerNotReady(pod, container string) {
	sc.t.Helper()
	testutil.Eventually(sc.t, 30*time.Second, func(ctx context.Context) (bool, error) {
		p, err := sc.getPod(ctx, pod)
		if err != nil {
			return false, err
		}
		st := podutil.FindStatus(p.Status.InitContainerStatuses, container)
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
