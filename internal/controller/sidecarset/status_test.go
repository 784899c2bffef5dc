package sidecarset_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestNotInjectedPods creates matching pods while Deckhand is down (the pod
// webhook's failurePolicy is Ignore, so they are admitted without sidecars)
// and checks that the SidecarSet reports them once Deckhand is back.
func TestNotInjectedPods(t *testing.T) {
	ns := env.Namespace(t)
	name := "missed-" + ns
	createSidecarSet(t, newSidecarSet(name, ns, "missed", "proxy:1"))
	waitStatus(t, name, 30*time.Second, "an empty SidecarSet reports everything injected", func(s *deckhandv1alpha1.SidecarSet) bool {
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
	for _, p := range createPods(t, ns, "missed", "missed-%d", 3) {
		if len(p.Spec.Containers) != 1 {
			t.Fatalf("pod %s got containers %v with the webhook down", p.Name, p.Spec.Containers)
		}
	}
	if _, err := env.StartManager(); err != nil {
		t.Fatal(err)
	}
	restarted = true

	s := waitStatus(t, name, 60*time.Second, "3 pods reported not injected", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsInjectedCondition)
		return s.Status.NotInjectedPods == 3 && s.Status.MatchedPods == 0 && c != nil && c.Status == metav1.ConditionFalse && c.Reason == "PodsNotInjected"
	})
	t.Logf("condition: %s", condition(s, deckhandv1alpha1.SidecarSetPodsInjectedCondition).Message)

	// A pod created now is injected and matched.
	p := newPod(ns, "injected", map[string]string{"app": "missed"})
	if err := env.Client.Create(ctxT(t), p); err != nil {
		t.Fatal(err)
	}
	if containerImage(p, "proxy") != "proxy:1" {
		t.Fatalf("pod created after the restart was not injected: %v", p.Spec.Containers)
	}
	waitStatus(t, name, 60*time.Second, "1 matched, 3 not injected", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 1 && s.Status.NotInjectedPods == 3
	})

	// Recreating (here: deleting) the missed pods clears the condition.
	for i := 0; i < 3; i++ {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("missed-%d", i)}}
		if err := env.Client.Delete(ctxT(t), pod, client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus(t, name, 60*time.Second, "no pod left uninjected", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsInjectedCondition)
		return s.Status.NotInjectedPods == 0 && c != nil && c.Status == metav1.ConditionTrue
	})
}

// TestDeploymentPodsInjected checks pods created by a controller: their
// object has no namespace, the admission request does.
func TestDeploymentPodsInjected(t *testing.T) {
	ns := env.Namespace(t)
	name := "deploy-" + ns
	createSidecarSet(t, newSidecarSet(name, ns, "deployed", "proxy:1"))
	labels := map[string]string{"app": "deployed"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(2)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
			},
		},
	}
	if err := env.Client.Create(ctxT(t), d); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns)
		if err != nil || len(pods) != 2 {
			return false, err
		}
		for i := range pods {
			if containerImage(&pods[i], "proxy") != "proxy:1" || !sidecarcontrol.ReadPodRecord(pods[i].Annotations).Has(name) {
				return false, fmt.Errorf("pod %s not injected: %v", pods[i].Name, pods[i].Spec.Containers)
			}
		}
		return true, nil
	}, "the Deployment's 2 pods exist with the sidecar")
	waitStatus(t, name, 60*time.Second, "2 matched, updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		st := s.Status
		return st.MatchedPods == 2 && st.UpdatedPods == 2 && st.ReadyPods == 2 && st.UpdatedReadyPods == 2
	})
}

// TestNonImageChangesAndUpdateSelector checks that only image changes roll
// out in place, only to the pods updateStrategy.selector picks, and that a
// non-image change is reported rather than applied.
func TestNonImageChangesAndUpdateSelector(t *testing.T) {
	ns := env.Namespace(t)
	name := "scope-" + ns
	createSidecarSet(t, newSidecarSet(name, ns, "scope", "proxy:1"))
	for i := 0; i < 4; i++ {
		labels := map[string]string{"app": "scope"}
		if i < 2 {
			labels["canary"] = "true"
		}
		if err := env.Client.Create(ctxT(t), newPod(ns, fmt.Sprintf("pod-%d", i), labels)); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus(t, name, 60*time.Second, "4 pods updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.UpdatedReadyPods == 4
	})
	// Image change limited to canary pods.
	updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "proxy:2"
		s.Spec.UpdateStrategy.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"canary": "true"}}
	})
	waitStatus(t, name, 60*time.Second, "the 2 canary pods updated, the rest held", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return s.Status.UpdatedPods == 2 && c != nil && c.Reason == "UpdateHeld"
	})
	pods, _ := listPods(ctxT(t), ns)
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
	updateSidecarSet(t, name, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Selector = nil
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "strict"}}
	})
	s := waitStatus(t, name, 60*time.Second, "the non-image change is reported", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetInPlaceUpdatableCondition)
		return s.Status.NotUpdatablePods == 4 && s.Status.UpdatedPods == 0 && c != nil && c.Status == metav1.ConditionFalse && c.Reason == "NonImageChanges"
	})
	t.Logf("InPlaceUpdatable: %s", condition(s, deckhandv1alpha1.SidecarSetInPlaceUpdatableCondition).Message)
	pods, _ = listPods(ctxT(t), ns)
	for i := range pods {
		for _, c := range pods[i].Spec.Containers {
			if c.Name == "proxy" && len(c.Env) != 0 {
				t.Errorf("pod %s was changed beyond its image: %v", pods[i].Name, c.Env)
			}
		}
	}
	// A new pod gets the new revision.
	p := newPod(ns, "fresh", map[string]string{"app": "scope"})
	if err := env.Client.Create(ctxT(t), p); err != nil {
		t.Fatal(err)
	}
	for _, c := range p.Spec.Containers {
		if c.Name == "proxy" && (len(c.Env) != 1 || c.Image != "proxy:2") {
			t.Errorf("a new pod did not get the latest revision: %+v", c)
		}
	}
}
