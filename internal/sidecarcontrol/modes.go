package sidecarcontrol

import (
	"fmt"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// Modes says who injects each SidecarSet's pods: the manager's default for
// SidecarSets that leave spec.injectionMode unset, and whether the API
// server serves MutatingAdmissionPolicies (admissionregistration.k8s.io/v1),
// which Policy mode needs. The manager finds that out once, at start.
type Modes struct {
	// Default is the mode of a SidecarSet without spec.injectionMode
	// (the --sidecarset-injection-mode flag); empty means Webhook.
	Default deckhandv1alpha1.InjectionMode
	// PolicyServed is true when the API server serves
	// MutatingAdmissionPolicies and their bindings and the installation lets
	// Deckhand write them (PolicyOff false).
	PolicyServed bool
	// PolicyOff is set when policy injection is turned off in this
	// installation (--sidecarset-policy-injection=false with a Webhook
	// default): Deckhand neither writes nor watches MutatingAdmissionPolicies
	// and has no permission to, so PolicyServed is false too.
	PolicyOff bool
	// WithoutPodWebhook is set when the manager serves no pod webhook
	// (--sidecarset-pod-webhook=false): Deckhand is off the pod create path,
	// and only Policy mode injects. The manager refuses to start so unless
	// Policy is the default and the API server serves the policies.
	WithoutPodWebhook bool
}

// Effective returns the mode s asks for: its own, or the default. A
// SidecarSet using a field only the pod webhook injects (WebhookOnlyField;
// validation refuses it an explicit Policy) takes Webhook for a Policy
// default, so that a default changed after it was admitted never compiles
// a policy that silently leaves the field out.
func (m Modes) Effective(s *deckhandv1alpha1.SidecarSet) deckhandv1alpha1.InjectionMode {
	if s.Spec.InjectionMode != "" {
		return s.Spec.InjectionMode
	}
	if m.Default == deckhandv1alpha1.PolicyInjection && WebhookOnlyField(&s.Spec) != "" {
		return deckhandv1alpha1.WebhookInjection
	}
	if m.Default != "" {
		return m.Default
	}
	return deckhandv1alpha1.WebhookInjection
}

// ByPolicy reports whether the API server injects s's pods: s is in Policy
// mode and the API server serves the policies. A Policy-mode SidecarSet on
// an API server that does not serve them falls back to the webhook.
func (m Modes) ByPolicy(s *deckhandv1alpha1.SidecarSet) bool {
	return m.PolicyServed && m.Effective(s) == deckhandv1alpha1.PolicyInjection
}

// WebhookOnlyField names the first field of spec that Policy mode cannot
// inject ("" if none): HotUpgrade sidecars, patchPodMetadata,
// resourcesPolicy, shareVolumeDevicePolicy, transferEnv envNames and
// sourceContainerNameFrom, and a Partial pinned revision.
func WebhookOnlyField(spec *deckhandv1alpha1.SidecarSetSpec) string {
	if len(spec.PatchPodMetadata) > 0 {
		return "spec.patchPodMetadata"
	}
	if r := spec.InjectionStrategy.Revision; r != nil && r.Policy == deckhandv1alpha1.PartialInjectRevision {
		return "spec.injectionStrategy.revision.policy"
	}
	for _, list := range []struct {
		path string
		cs   []deckhandv1alpha1.SidecarContainer
	}{{"spec.initContainers", spec.InitContainers}, {"spec.containers", spec.Containers}} {
		for i := range list.cs {
			c := &list.cs[i]
			at := fmt.Sprintf("%s[%d].", list.path, i)
			switch {
			case IsHotUpgrade(c):
				return at + "upgradeStrategy.upgradeType"
			case c.ResourcesPolicy != nil:
				return at + "resourcesPolicy"
			case c.ShareVolumeDevicePolicy != nil && c.ShareVolumeDevicePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled:
				return at + "shareVolumeDevicePolicy"
			}
			for j, t := range c.TransferEnv {
				if len(t.EnvNames) > 0 || t.SourceContainerNameFrom != nil {
					return fmt.Sprintf("%stransferEnv[%d]", at, j)
				}
			}
		}
	}
	return ""
}
