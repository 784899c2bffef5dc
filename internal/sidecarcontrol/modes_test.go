package sidecarcontrol

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// TestEffectiveModeFallsBackForWebhookOnlyFields: a SidecarSet without a
// mode of its own takes Webhook for a Policy default when it uses a field
// the compiled policy cannot inject, so changing the default never
// compiles a policy that silently leaves the field out.
func TestEffectiveModeFallsBackForWebhookOnlyFields(t *testing.T) {
	plain := deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: "log", Image: "log:1"}}
	for _, tc := range []struct {
		name   string
		mutate func(*deckhandv1alpha1.SidecarSetSpec)
		field  string
	}{
		{"plain", func(*deckhandv1alpha1.SidecarSetSpec) {}, ""},
		{"patchPodMetadata", func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{{Annotations: map[string]string{"example.com/a": "b"}}}
		}, "spec.patchPodMetadata"},
		{"Partial pin", func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.InjectionStrategy.Revision = &deckhandv1alpha1.SidecarSetInjectRevision{Policy: deckhandv1alpha1.PartialInjectRevision}
		}, "spec.injectionStrategy.revision.policy"},
		{"HotUpgrade", func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.Containers[0].UpgradeStrategy = &deckhandv1alpha1.SidecarContainerUpgradeStrategy{UpgradeType: deckhandv1alpha1.HotUpgrade, HotUpgradeEmptyImage: "e:1"}
		}, "spec.containers[0].upgradeStrategy.upgradeType"},
		{"resourcesPolicy", func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.Containers[0].ResourcesPolicy = &deckhandv1alpha1.ResourcesPolicy{}
		}, "spec.containers[0].resourcesPolicy"},
		{"shareVolumeDevicePolicy on an init container", func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.InitContainers = []deckhandv1alpha1.SidecarContainer{plain}
			s.InitContainers[0].ShareVolumeDevicePolicy = &deckhandv1alpha1.ShareVolumePolicy{Type: deckhandv1alpha1.ShareVolumePolicyEnabled}
		}, "spec.initContainers[0].shareVolumeDevicePolicy"},
		{"transferEnv envNames", func(s *deckhandv1alpha1.SidecarSetSpec) {
			s.Containers[0].TransferEnv = []deckhandv1alpha1.TransferEnvVar{{SourceContainerName: "app", EnvNames: []string{"A"}}}
		}, "spec.containers[0].transferEnv[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &deckhandv1alpha1.SidecarSet{Spec: deckhandv1alpha1.SidecarSetSpec{Containers: []deckhandv1alpha1.SidecarContainer{plain}}}
			tc.mutate(&s.Spec)
			if got := WebhookOnlyField(&s.Spec); got != tc.field {
				t.Fatalf("WebhookOnlyField = %q, want %q", got, tc.field)
			}
			want := deckhandv1alpha1.PolicyInjection
			if tc.field != "" {
				want = deckhandv1alpha1.WebhookInjection
			}
			if got := (Modes{Default: deckhandv1alpha1.PolicyInjection}).Effective(s); got != want {
				t.Errorf("Effective with a Policy default = %s, want %s", got, want)
			}
			s.Spec.InjectionMode = deckhandv1alpha1.PolicyInjection
			if got := (Modes{Default: deckhandv1alpha1.WebhookInjection}).Effective(s); got != deckhandv1alpha1.PolicyInjection {
				t.Errorf("an explicit mode is not kept: %s", got)
			}
		})
	}
}
