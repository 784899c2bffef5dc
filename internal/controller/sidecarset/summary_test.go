package sidecarset_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	sidecarsetctrl "github.com/deckhand-dev/deckhand/internal/controller/sidecarset"
	"github.com/deckhand-dev/deckhand/test/health"
)

// TestSummaryThroughARollout follows a SidecarSet through the states tools
// read from its summary conditions: Ready with every pod injected, updated
// and Ready; a paused rollout (not Ready, Argo CD Suspended); and a rollout
// that cannot finish because a pod is never scheduled, so its sidecar never
// reports the new image (Reconciling: kstatus InProgress, Argo CD
// Progressing).
func TestSummaryThroughARollout(t *testing.T) {
	s, ns := readySidecarSet(t, "summary")
	name := s.Name

	updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Paused = true
		s.Spec.Containers[0].Image = "proxy:2"
	})
	health.Wait(t, env.Client, s, time.Minute, health.IsPaused(sidecarsetctrl.ReasonUpdatePaused))

	pending := newPod(ns, "pending", map[string]string{"app": "summary"})
	pending.Spec.NodeSelector = map[string]string{"apps.deckhand.dev/no-such-node": "true"}
	if err := env.Client.Create(ctxT(t), pending); err != nil {
		t.Fatal(err)
	}
	updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = false })
	health.Wait(t, env.Client, s, time.Minute, health.IsReconciling(sidecarsetctrl.ReasonRolloutInProgress))
}

// TestSummaryStalledByPodsNotInjected creates a pod before the SidecarSet
// that selects it: only recreating the pod injects it, so the SidecarSet is
// stalled (kstatus Failed, Argo CD Degraded) until the pod is gone.
func TestSummaryStalledByPodsNotInjected(t *testing.T) {
	ns := env.Namespace(t)
	early := newPod(ns, "early", map[string]string{"app": "early"})
	if err := env.Client.Create(ctxT(t), early); err != nil {
		t.Fatal(err)
	}
	s := newSidecarSet("early-"+ns, ns, "early", "proxy:1")
	createSidecarSet(t, s)
	health.Wait(t, env.Client, s, time.Minute, health.IsStalled(sidecarsetctrl.ReasonPodsNotInjected))

	if err := env.Client.Delete(ctxT(t), early); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, s, time.Minute, health.IsReady(sidecarsetctrl.ReasonAllPodsUpdated))
}

// TestSummaryStalledByNonImageChange changes more than a sidecar's image:
// running pods cannot be updated in place, so the rollout is stalled until
// they are recreated.
func TestSummaryStalledByNonImageChange(t *testing.T) {
	s, ns := readySidecarSet(t, "env")
	name := s.Name

	updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "strict"}}
	})
	health.Wait(t, env.Client, s, time.Minute, health.IsStalled(sidecarsetctrl.ReasonNonImageChanges))

	if err := env.Client.Delete(ctxT(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "running"}}); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctxT(t), newPod(ns, "recreated", map[string]string{"app": "env"})); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, s, time.Minute, health.IsReady(sidecarsetctrl.ReasonAllPodsUpdated))
}

// readySidecarSet creates, in a namespace of its own, a SidecarSet for the
// pods labelled app=<app> and one such pod, named running, and waits until
// the SidecarSet is Ready. It returns the SidecarSet and the namespace.
func readySidecarSet(t *testing.T, app string) (*deckhandv1alpha1.SidecarSet, string) {
	t.Helper()
	ns := env.Namespace(t)
	s := newSidecarSet(app+"-"+ns, ns, app, "proxy:1")
	createSidecarSet(t, s)
	if err := env.Client.Create(ctxT(t), newPod(ns, "running", map[string]string{"app": app})); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, s, time.Minute, health.IsReady(sidecarsetctrl.ReasonAllPodsUpdated))
	return s, ns
}
