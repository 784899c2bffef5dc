package sidecarset_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// The tests of this file are about injection as the SidecarSet reports it:
// which pods got their sidecars, which did not and why.

// TestNotInjectedPods creates matching pods while Deckhand is down (the pod
// webhook's failurePolicy is Ignore, so they are admitted without sidecars)
// and checks that the SidecarSet reports them once Deckhand is back.
func TestNotInjectedPods(t *testing.T) {
	sc := newScenario(t, "missed")
	sc.waitStatus(30*time.Second, "an empty SidecarSet reports everything injected", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsInjectedCondition)
		return c != nil && c.Status == metav1.ConditionTrue
	})

	env.StopManager()
	restarted := false
	defer func() {
		if !restarted {
			_, _ = env.StartManager()
		}
	}()
	// The webhook's failurePolicy Ignore admits them while it is down.
	for _, p := range sc.createPods("missed-%d", 3) {
		if len(p.Spec.Containers) != 1 {
			t.Fatalf("pod %s got containers %v with the webhook down", p.Name, p.Spec.Containers)
		}
	}
	if _, err := env.StartManager(); err != nil {
		t.Fatal(err)
	}
	restarted = true

	s := sc.waitStatus(60*time.Second, "3 pods reported not injected", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsInjectedCondition)
		return s.Status.NotInjectedPods == 3 && s.Status.MatchedPods == 0 && c != nil && c.Status == metav1.ConditionFalse && c.Reason == "PodsNotInjected"
	})
	t.Logf("condition: %s", condition(s, deckhandv1alpha1.SidecarSetPodsInjectedCondition).Message)

	// A pod created now is injected and matched.
	p := sc.create(sc.pod("injected"))
	if containerImage(p, "proxy") != "proxy:1" {
		t.Fatalf("pod created after the restart was not injected: %v", p.Spec.Containers)
	}
	sc.waitStatus(60*time.Second, "1 matched, 3 not injected", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 1 && s.Status.NotInjectedPods == 3
	})

	// Recreating (here: deleting) the missed pods clears the condition.
	for i := 0; i < 3; i++ {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: sc.ns, Name: fmt.Sprintf("missed-%d", i)}}
		if err := env.Client.Delete(ctxT(t), pod, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	sc.waitStatus(60*time.Second, "no pod left uninjected", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsInjectedCondition)
		return s.Status.NotInjectedPods == 0 && c != nil && c.Status == metav1.ConditionTrue
	})
}

// TestDeploymentPodsInjected checks pods created by a controller: their
// object has no namespace, the admission request does.
func TestDeploymentPodsInjected(t *testing.T) {
	sc := newScenario(t, "deployed")
	labels := map[string]string{"app": sc.app}
	d := testutil.Deployment(sc.ns, "web", 2, labels, corev1.Container{Name: "app", Image: "app:1"})
	if err := env.Client.Create(ctxT(t), d); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, sc.ns)
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for i := range pods {
			if containerImage(&pods[i], "proxy") != "proxy:1" || !sidecarcontrol.ReadPodRecord(pods[i].Annotations).Has(sc.name) {
				return false, fmt.Errorf("pod %s not injected: %v", pods[i].Name, pods[i].Spec.Containers)
			}
		}
		return true, nil
	}, "the Deployment's 2 pods exist with the sidecar")
	sc.waitStatus(60*time.Second, "2 matched, updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		st := s.Status
		return st.MatchedPods == 2 && st.UpdatedPods == 2 && st.ReadyPods == 2 && st.UpdatedReadyPods == 2
	})
}

// TestContainerNameConflict: a SidecarSet never changes a container it did
// not inject. A pod that already has a container named like one of the
// sidecars keeps its own container, is not injected by (nor recorded for)
// the SidecarSet, is reported as not injected with the clashing container
// named, and a later sidecar image change leaves the app's container alone
// while the pods that were injected roll as usual.
func TestContainerNameConflict(t *testing.T) {
	sc := newScenario(t, "clash", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers = append(s.Spec.Containers, deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: "app", Image: "sidecar-app:1"}})
	})
	name := sc.name

	// newPod's own container is called "app".
	clash := sc.create(sc.pod("clash"))
	if got := names(clash.Spec.Containers); fmt.Sprint(got) != "[app]" || containerImage(clash, "app") != "app:1" {
		t.Fatalf("the clashing pod got containers %v (app image %s), want only its own app:1", got, containerImage(clash, "app"))
	}
	if sidecarcontrol.ReadPodRecord(clash.Annotations).Has(name) || clash.Annotations[deckhandv1alpha1.SidecarSetHashAnnotation] != "" {
		t.Fatalf("the clashing pod records the SidecarSet: %v", clash.Annotations)
	}

	// A pod without the clash, whose own container has another name, is
	// injected as usual.
	plain := sc.pod("plain")
	plain.Spec.Containers[0].Name = "web"
	sc.create(plain)
	if got := names(plain.Spec.Containers); fmt.Sprint(got) != "[proxy app web]" {
		t.Fatalf("the plain pod got containers %v, want [proxy app web]", got)
	}

	st := sc.waitStatus(60*time.Second, "1 pod matched and updated, 1 not injected for the clash", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsInjectedCondition)
		st := s.Status
		return st.MatchedPods == 1 && st.UpdatedPods == 1 && st.UpdatedReadyPods == 1 && st.NotInjectedPods == 1 &&
			c != nil && c.Status == metav1.ConditionFalse && c.Reason == "ContainerNameConflict"
	})
	msg := condition(st, deckhandv1alpha1.SidecarSetPodsInjectedCondition).Message
	if !containsAll(msg, `"app"`, sc.ns+"/clash") {
		t.Errorf("PodsInjected message does not name the container and the pod: %s", msg)
	}
	waitEvent(t, name, corev1.EventTypeWarning, "ContainerNameConflict", `"app"`)

	// An image change of the clashing sidecar rolls to the injected pod
	// only; the app's own container keeps its image.
	sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[1].Image = "sidecar-app:2" })
	sc.waitStatus(90*time.Second, "the injected pod updated, the clashing one still not injected", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		st := s.Status
		return st.MatchedPods == 1 && st.UpdatedPods == 1 && st.UpdatedReadyPods == 1 && st.NotInjectedPods == 1 &&
			st.NotUpdatablePods == 0 && c != nil && c.Status == metav1.ConditionTrue
	})
	if img := sc.podImage("plain", "app"); img != "sidecar-app:2" {
		t.Errorf("the injected pod's sidecar runs %s, want sidecar-app:2", img)
	}
	if img := sc.podImage("clash", "app"); img != "app:1" {
		t.Fatalf("the SidecarSet changed the app's own container to %s", img)
	}

	// And it stays so: later passes do not count the clashing pod as
	// mid-update, nor touch it.
	for range 3 {
		gen := sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = !s.Spec.UpdateStrategy.Paused }).Generation
		sc.waitStatus(30*time.Second, fmt.Sprintf("generation %d observed with the same counts", gen), func(s *deckhandv1alpha1.SidecarSet) bool {
			st := s.Status
			return s.Generation >= gen && st.MatchedPods == 1 && st.UpdatedPods == 1 && st.NotInjectedPods == 1
		})
	}
	if img := sc.podImage("clash", "app"); img != "app:1" {
		t.Fatalf("the SidecarSet changed the app's own container to %s", img)
	}
}
