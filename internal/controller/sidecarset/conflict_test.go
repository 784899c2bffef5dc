package sidecarset_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestContainerNameConflict: a SidecarSet never changes a container it did
// not inject. A pod that already has a container named like one of the
// sidecars keeps its own container, is not injected by (nor recorded for)
// the SidecarSet, is reported as not injected with the clashing container
// named, and a later sidecar image change leaves the app's container alone
// while the pods that were injected roll as usual.
func TestContainerNameConflict(t *testing.T) {
	ns := env.Namespace(t)
	name := "clash-" + ns
	s := newSidecarSet(name, ns, "clash", "proxy:1")
	s.Spec.Containers = append(s.Spec.Containers, deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: "app", Image: "sidecar-app:1"}})
	createSidecarSet(t, s)

	// newPod's own container is called "app".
	clash := newPod(ns, "clash", map[string]string{"app": "clash"})
	if err := env.Client.Create(ctxT(t), clash); err != nil {
		t.Fatal(err)
	}
	if got := names(clash.Spec.Containers); fmt.Sprint(got) != "[app]" || containerImage(clash, "app") != "app:1" {
		t.Fatalf("the clashing pod got containers %v (app image %s), want only its own app:1", got, containerImage(clash, "app"))
	}
	if sidecarcontrol.ReadPodRecord(clash.Annotations).Has(name) || clash.Annotations[deckhandv1alpha1.SidecarSetHashAnnotation] != "" {
		t.Fatalf("the clashing pod records the SidecarSet: %v", clash.Annotations)
	}

	// A pod without the clash, whose own container has another name, is
	// injected as usual.
	plain := newPod(ns, "plain", map[string]string{"app": "clash"})
	plain.Spec.Containers[0].Name = "web"
	if err := env.Client.Create(ctxT(t), plain); err != nil {
		t.Fatal(err)
	}
	if got := names(plain.Spec.Containers); fmt.Sprint(got) != "[proxy app web]" {
		t.Fatalf("the plain pod got containers %v, want [proxy app web]", got)
	}

	st := waitStatus(t, name, 60*time.Second, "1 pod matched and updated, 1 not injected for the clash", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsInjectedCondition)
		st := s.Status
		return st.MatchedPods == 1 && st.UpdatedPods == 1 && st.UpdatedReadyPods == 1 && st.NotInjectedPods == 1 &&
			c != nil && c.Status == metav1.ConditionFalse && c.Reason == "ContainerNameConflict"
	})
	msg := condition(st, deckhandv1alpha1.SidecarSetPodsInjectedCondition).Message
	if !strings.Contains(msg, `"app"`) || !strings.Contains(msg, ns+"/clash") {
		t.Errorf("PodsInjected message does not name the container and the pod: %s", msg)
	}
	waitEvent(t, name, corev1.EventTypeWarning, "ContainerNameConflict", `"app"`)

	// An image change of the clashing sidecar rolls to the injected pod
	// only; the app's own container keeps its image.
	updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[1].Image = "sidecar-app:2" })
	waitStatus(t, name, 90*time.Second, "the injected pod updated, the clashing one still not injected", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		st := s.Status
		return st.MatchedPods == 1 && st.UpdatedPods == 1 && st.UpdatedReadyPods == 1 && st.NotInjectedPods == 1 &&
			st.NotUpdatablePods == 0 && c != nil && c.Status == metav1.ConditionTrue
	})
	if img := podImage(t, ns, "plain", "app"); img != "sidecar-app:2" {
		t.Errorf("the injected pod's sidecar runs %s, want sidecar-app:2", img)
	}
	if img := podImage(t, ns, "clash", "app"); img != "app:1" {
		t.Fatalf("the SidecarSet changed the app's own container to %s", img)
	}

	// And it stays so: later passes do not count the clashing pod as
	// mid-update, nor touch it.
	for range 3 {
		gen := updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = !s.Spec.UpdateStrategy.Paused }).Generation
		waitStatus(t, name, 30*time.Second, fmt.Sprintf("generation %d observed with the same counts", gen), func(s *deckhandv1alpha1.SidecarSet) bool {
			st := s.Status
			return s.Generation >= gen && st.MatchedPods == 1 && st.UpdatedPods == 1 && st.NotInjectedPods == 1
		})
	}
	if img := podImage(t, ns, "clash", "app"); img != "app:1" {
		t.Fatalf("the SidecarSet changed the app's own container to %s", img)
	}
}

func names(cs []corev1.Container) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// waitEvent waits for an event about the SidecarSet with the given type and
// reason whose note contains text.
func waitEvent(t *testing.T, sidecarSet, typ, reason, text string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs); err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "SidecarSet" && e.Regarding.Name == sidecarSet && e.Type == typ && e.Reason == reason && strings.Contains(e.Note, text) {
				return true, nil
			}
		}
		return false, nil
	}, "a %s event %s about SidecarSet %s mentioning %s", typ, reason, sidecarSet, text)
}
