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
	sc := readySidecarSet(t, "summary")
	s := sc.set

	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Paused = true
		s.Spec.Containers[0].Image = "proxy:2"
	})
	health.Wait(t, env.Client, s, time.Minute, health.IsPaused(sidecarsetctrl.ReasonUpdatePaused))

	pending := sc.pod("pending")
	pending.Spec.NodeSelector = map[string]string{"apps.deckhand.dev/no-such-node": "true"}
	sc.create(pending)
	sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = false })
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
	sc := readySidecarSet(t, "env")
	s := sc.set

	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "strict"}}
	})
	health.Wait(t, env.Client, s, time.Minute, health.IsStalled(sidecarsetctrl.ReasonNonImageChanges))

	if err := env.Client.Delete(ctxT(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: sc.ns, Name: "running"}}); err != nil {
		t.Fatal(err)
	}
	sc.create(sc.pod("recreated"))
	health.Wait(t, env.Client, s, time.Minute, health.IsReady(sidecarsetctrl.ReasonAllPodsUpdated))
}

// readySidecarSet starts a scenario for the pods labelled app=<app>,
// creates one such pod, named running, and waits until the SidecarSet is
// Ready.
func readySidecarSet(t *testing.T, app string) *scenario {
	t.Helper()
	sc := newScenario(t, app)
	sc.create(sc.pod("running"))
	health.Wait(t, env.Client, sc.set, time.Minute, health.IsReady(sidecarsetctrl.ReasonAllPodsUpdated))
	return sc
}
