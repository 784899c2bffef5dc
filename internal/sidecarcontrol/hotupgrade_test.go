package sidecarcontrol

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TestHotUpgradeSetsTakeWebhookForAPolicyDefault: the manager's Policy
// default never sends a HotUpgrade SidecarSet to the policy compiler; an
// explicit mode stays as written (validation refuses Policy).
func TestHotUpgradeSetsTakeWebhookForAPolicyDefault(t *testing.T) {
	hot := &deckhandv1alpha1.SidecarSet{Spec: deckhandv1alpha1.SidecarSetSpec{Containers: []deckhandv1alpha1.SidecarContainer{{
		Container:       corev1.Container{Name: "mesh", Image: "mesh:1"},
		UpgradeStrategy: &deckhandv1alpha1.SidecarContainerUpgradeStrategy{UpgradeType: deckhandv1alpha1.HotUpgrade, HotUpgradeEmptyImage: "e:1"},
	}}}}
	cold := &deckhandv1alpha1.SidecarSet{Spec: deckhandv1alpha1.SidecarSetSpec{Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "log", Image: "log:1"}}}}}
	m := Modes{Default: deckhandv1alpha1.PolicyInjection, PolicyServed: true}
	if m.Effective(hot) != deckhandv1alpha1.WebhookInjection || m.ByPolicy(hot) {
		t.Errorf("a HotUpgrade SidecarSet without a mode follows the Policy default")
	}
	if m.Effective(cold) != deckhandv1alpha1.PolicyInjection {
		t.Errorf("a cold SidecarSet does not follow the Policy default")
	}
	hot.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection
	if m.Effective(hot) != deckhandv1alpha1.PolicyInjection {
		t.Errorf("an explicit mode is not kept")
	}
	if got := InjectedContainers(&hot.Spec); len(got) != 2 || got[0].Name != "mesh-1" || got[1].Image != "e:1" || len(got[1].Env) != 2 {
		t.Errorf("InjectedContainers = %+v", got)
	}
	if got := InjectedContainers(&cold.Spec); &got[0] != &cold.Spec.Containers[0] {
		t.Errorf("a SidecarSet without HotUpgrade sidecars gets a copy of its containers")
	}
}
