package sidecarset_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

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
	ns := env.Namespace(t)
	name := "summary-" + ns
	s := newSidecarSet(name, ns, "summary", "proxy:1")
	createSidecarSet(t, s)
	if err := env.Client.Create(ctxT(t), newPod(ns, "running", map[string]string{"app": "summary"})); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, s, time.Minute, health.IsReady(sidecarsetctrl.ReasonAllPodsUpdated))

	updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Paused = true
		s.Spec.Containers[0].Image = "proxy:2"
	})
	paused := health.Want{Ready: metav1.ConditionFalse, Reason: sidecarsetctrl.ReasonUpdatePaused, Kstatus: status.InProgressStatus, ArgoCD: health.Suspended}
	health.Wait(t, env.Client, s, time.Minute, paused)

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
	ns := env.Namespace(t)
	name := "env-" + ns
	s := newSidecarSet(name, ns, "env", "proxy:1")
	createSidecarSet(t, s)
	pod := newPod(ns, "running", map[string]string{"app": "env"})
	if err := env.Client.Create(ctxT(t), pod); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, s, time.Minute, health.IsReady(sidecarsetctrl.ReasonAllPodsUpdated))

	updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "strict"}}
	})
	health.Wait(t, env.Client, s, time.Minute, health.IsStalled(sidecarsetctrl.ReasonNonImageChanges))

	if err := env.Client.Delete(ctxT(t), pod); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctxT(t), newPod(ns, "recreated", map[string]string{"app": "env"})); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, s, time.Minute, health.IsReady(sidecarsetctrl.ReasonAllPodsUpdated))
}
