package sidecarset

import (
	"context"
	"fmt"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/updateorder"
	"github.com/deckhand-dev/deckhand/internal/webhook/webhookutil"
)

var sidecarSetGK = deckhandv1alpha1.GroupVersion.WithKind("SidecarSet").GroupKind()

// Validator checks SidecarSets: its own rules with field paths, conflicts
// with other SidecarSets (from the cache), and the containers against the
// API server's own pod validation (a server-side dry run).
type Validator struct {
	// Lister reads the other SidecarSets from the cache.
	Lister *sidecarcontrol.Lister
	// DryRun validates the containers in a synthetic pod; nil skips it.
	DryRun *PodDryRunner
	// MetadataAllowlist is the manager's --sidecarset-pod-metadata-allowlist:
	// the annotation keys spec.patchPodMetadata may set (none when empty).
	MetadataAllowlist sidecarcontrol.MetadataAllowlist
	// LabelAllowlist is the manager's --sidecarset-pod-label-allowlist: the
	// label keys spec.patchPodMetadata may set (none when empty).
	LabelAllowlist sidecarcontrol.MetadataAllowlist
}

// Validate judges a new (old is nil) or changed SidecarSet.
func (v *Validator) Validate(ctx context.Context, old, s *deckhandv1alpha1.SidecarSet) (admission.Warnings, error) {
	errs := validate(old, s)
	mode := s.Spec.InjectionMode
	errs = append(errs, v.validateInjectionExtras(old, s)...)
	if v.Lister != nil {
		errs = append(errs, validateConflicts(s, v.Lister.All())...)
		errs = append(errs, validatePolicyPeers(s, v.Lister.All(), v.Lister.Modes())...)
		errs = append(errs, validateModeServed(s, v.Lister.Modes())...)
		errs = append(errs, validatePin(old, s, v.Lister)...)
		errs = append(errs, validateHotUpgradeConflicts(s, v.Lister.All())...)
		mode = v.Lister.Modes().Effective(s)
	}
	errs = append(errs, validateHotUpgrade(s, mode)...)
	if old != nil {
		errs = append(errs, validateHotUpgradeUpdate(old, s)...)
	}
	var warnings admission.Warnings
	if len(errs) == 0 && v.DryRun != nil {
		dryErrs, warn := v.DryRun.Validate(ctx, s)
		errs = append(errs, dryErrs...)
		if warn != "" {
			warnings = append(warnings, warn)
		}
	}
	return warnings, webhookutil.Invalid(sidecarSetGK, s.Name, errs)
}

// validate returns everything wrong with s that can be told from s alone
// (old is nil on create).
func validate(_, s *deckhandv1alpha1.SidecarSet) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	labelOpts := metav1validation.LabelSelectorValidationOptions{}

	if s.Spec.Selector == nil {
		errs = append(errs, field.Required(spec.Child("selector"), "a pod selector is required"))
	} else {
		if len(s.Spec.Selector.MatchLabels)+len(s.Spec.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(spec.Child("selector"), s.Spec.Selector, "must not be empty: an empty selector would inject every pod in the cluster"))
		}
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Spec.Selector, labelOpts, spec.Child("selector"))...)
	}
	if s.Spec.Namespace != "" {
		errs = append(errs, webhookutil.Check(spec.Child("namespace"), s.Spec.Namespace, validation.IsDNS1123Label)...)
	}
	if s.Spec.NamespaceSelector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Spec.NamespaceSelector, labelOpts, spec.Child("namespaceSelector"))...)
	}

	if len(s.Spec.Containers)+len(s.Spec.InitContainers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), "at least one container or init container is required"))
	}
	names := map[string]bool{}
	errs = append(errs, validateSidecars(s.Spec.InitContainers, spec.Child("initContainers"), names, true)...)
	errs = append(errs, validateSidecars(s.Spec.Containers, spec.Child("containers"), names, false)...)

	volumes := map[string]bool{}
	for i := range s.Spec.Volumes {
		p := spec.Child("volumes").Index(i).Child("name")
		name := s.Spec.Volumes[i].Name
		switch {
		case name == "":
			errs = append(errs, field.Required(p, ""))
		case volumes[name]:
			errs = append(errs, field.Duplicate(p, name))
		default:
			errs = append(errs, webhookutil.Check(p, name, validation.IsDNS1123Label)...)
		}
		volumes[name] = true
	}
	for i, ps := range s.Spec.ImagePullSecrets {
		if ps.Name == "" {
			errs = append(errs, field.Required(spec.Child("imagePullSecrets").Index(i).Child("name"), ""))
		}
	}

	switch s.Spec.InjectionMode {
	case "", deckhandv1alpha1.WebhookInjection, deckhandv1alpha1.PolicyInjection:
	default:
		errs = append(errs, field.NotSupported(spec.Child("injectionMode"), s.Spec.InjectionMode, []string{
			string(deckhandv1alpha1.WebhookInjection), string(deckhandv1alpha1.PolicyInjection)}))
	}

	us := s.Spec.UpdateStrategy
	usPath := spec.Child("updateStrategy")
	switch us.Type {
	case "", deckhandv1alpha1.RollingUpdateSidecarSetStrategy, deckhandv1alpha1.NotUpdateSidecarSetStrategy:
	default:
		errs = append(errs, field.NotSupported(usPath.Child("type"), us.Type, []string{
			string(deckhandv1alpha1.RollingUpdateSidecarSetStrategy), string(deckhandv1alpha1.NotUpdateSidecarSetStrategy)}))
	}
	switch us.Recreate {
	case "", deckhandv1alpha1.RecreateNever:
	case deckhandv1alpha1.RecreateEvict:
		if us.Type == deckhandv1alpha1.NotUpdateSidecarSetStrategy {
			errs = append(errs, field.Invalid(usPath.Child("recreate"), us.Recreate,
				"Evict recreates running pods, which spec.updateStrategy.type NotUpdate never changes: set type to RollingUpdate, or recreate to Never"))
		}
	default:
		errs = append(errs, field.NotSupported(usPath.Child("recreate"), us.Recreate, []string{
			string(deckhandv1alpha1.RecreateNever), string(deckhandv1alpha1.RecreateEvict)}))
	}
	if us.MaxUnavailable != nil {
		errs = append(errs, webhookutil.ValidateIntOrPercent(us.MaxUnavailable, usPath.Child("maxUnavailable"), 1, true)...)
	}
	if us.Partition != nil {
		errs = append(errs, webhookutil.ValidateIntOrPercent(us.Partition, usPath.Child("partition"), 0, true)...)
	}
	if us.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(us.Selector, labelOpts, usPath.Child("selector"))...)
		if us.Partition != nil {
			errs = append(errs, field.Forbidden(usPath.Child("partition"), "may not be set together with spec.updateStrategy.selector"))
		}
	}
	errs = append(errs, updateorder.Validate(us.PriorityStrategy, usPath.Child("priorityStrategy"), us.ScatterStrategy, usPath.Child("scatterStrategy"))...)
	if d := us.ProgressDeadlineSeconds; d != nil && (*d < 1 || *d > 604800) {
		errs = append(errs, field.Invalid(usPath.Child("progressDeadlineSeconds"), *d, "must be between 1 and 604800"))
	}
	errs = append(errs, webhookutil.ValidateRolloutFailurePolicy(us.OnFailure, usPath.Child("onFailure"))...)
	return errs
}

func validateSidecars(cs []deckhandv1alpha1.SidecarContainer, p *field.Path, names map[string]bool, init bool) field.ErrorList {
	var errs field.ErrorList
	for i := range cs {
		c := &cs[i]
		cp := p.Index(i)
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(cp.Child("name"), ""))
		case names[c.Name]:
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		default:
			errs = append(errs, webhookutil.Check(cp.Child("name"), c.Name, validation.IsDNS1123Label)...)
		}
		names[c.Name] = true
		if strings.TrimSpace(c.Image) == "" {
			errs = append(errs, field.Required(cp.Child("image"), "a sidecar needs an image"))
		} else if c.Image != strings.TrimSpace(c.Image) {
			errs = append(errs, field.Invalid(cp.Child("image"), c.Image, "must not have leading or trailing whitespace"))
		}
		errs = append(errs, validateResources(c, cp.Child("resources"))...)
		switch c.PodInjectPolicy {
		case "", deckhandv1alpha1.BeforeAppContainer, deckhandv1alpha1.AfterAppContainer:
		default:
			errs = append(errs, field.NotSupported(cp.Child("podInjectPolicy"), c.PodInjectPolicy, []string{
				string(deckhandv1alpha1.BeforeAppContainer), string(deckhandv1alpha1.AfterAppContainer)}))
		}
		switch c.ShareVolumePolicy.Type {
		case "", deckhandv1alpha1.ShareVolumePolicyEnabled, deckhandv1alpha1.ShareVolumePolicyDisabled:
		default:
			errs = append(errs, field.NotSupported(cp.Child("shareVolumePolicy", "type"), c.ShareVolumePolicy.Type, []string{
				string(deckhandv1alpha1.ShareVolumePolicyEnabled), string(deckhandv1alpha1.ShareVolumePolicyDisabled)}))
		}
		if c.ShareVolumeDevicePolicy != nil && c.ShareVolumeDevicePolicy.Writable {
			errs = append(errs, field.Forbidden(cp.Child("shareVolumeDevicePolicy", "writable"), "a volumeDevice has no read-only form: shared devices are always as the app has them"))
		}
		errs = append(errs, validateTransferEnv(c, cp)...)
		if !init && c.RestartPolicy != nil {
			errs = append(errs, field.Forbidden(cp.Child("restartPolicy"), "only init containers may set restartPolicy (Always makes a native sidecar)"))
		}
	}
	return errs
}

func validateResources(c *deckhandv1alpha1.SidecarContainer, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, q := range c.Resources.Requests {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), q.String(), "must not be negative"))
		}
		if limit, ok := c.Resources.Limits[name]; ok && q.Cmp(limit) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), q.String(),
				fmt.Sprintf("must be less than or equal to the %s limit of %s", name, limit.String())))
		}
	}
	for name, q := range c.Resources.Limits {
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(p.Child("limits").Key(string(name)), q.String(), "must not be negative"))
		}
	}
	_ = resource.Quantity{}
	return errs
}

// validateConflicts rejects s if a SidecarSet that can select the same pods
// (see sidecarcontrol.CanOverlap) injects a container of the same name, or a
// different volume of the same name.
func validateConflicts(s *deckhandv1alpha1.SidecarSet, others []*deckhandv1alpha1.SidecarSet) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for _, o := range others {
		if o.Name == s.Name || o.DeletionTimestamp != nil || !sidecarcontrol.CanOverlap(s, o) {
			continue
		}
		theirs := map[string]bool{}
		for i := range o.Spec.InitContainers {
			theirs[o.Spec.InitContainers[i].Name] = true
		}
		for i := range o.Spec.Containers {
			theirs[o.Spec.Containers[i].Name] = true
		}
		why := fmt.Sprintf("SidecarSet %q, whose selector and namespaces can match the same pods, injects a container of the same name", o.Name)
		for i := range s.Spec.InitContainers {
			if n := s.Spec.InitContainers[i].Name; theirs[n] {
				errs = append(errs, field.Invalid(spec.Child("initContainers").Index(i).Child("name"), n, why))
			}
		}
		for i := range s.Spec.Containers {
			if n := s.Spec.Containers[i].Name; theirs[n] {
				errs = append(errs, field.Invalid(spec.Child("containers").Index(i).Child("name"), n, why))
			}
		}
		for i := range s.Spec.Volumes {
			for j := range o.Spec.Volumes {
				if s.Spec.Volumes[i].Name == o.Spec.Volumes[j].Name && !apiequality.Semantic.DeepEqual(s.Spec.Volumes[i], o.Spec.Volumes[j]) {
					errs = append(errs, field.Invalid(spec.Child("volumes").Index(i).Child("name"), s.Spec.Volumes[i].Name,
						fmt.Sprintf("SidecarSet %q, whose selector and namespaces can match the same pods, has a different volume of the same name", o.Name)))
				}
			}
		}
	}
	return errs
}

// validatePolicyPeers rejects s, in Policy mode, if another Policy-mode
// SidecarSet that can select the same pods has a volume or image pull
// secret of the same name. The API server applies the two policies in no
// set order, and the item would then land where the policy that ran first
// puts it, not where injection in name order (the webhook's) puts it.
func validatePolicyPeers(s *deckhandv1alpha1.SidecarSet, others []*deckhandv1alpha1.SidecarSet, modes sidecarcontrol.Modes) field.ErrorList {
	if modes.Effective(s) != deckhandv1alpha1.PolicyInjection {
		return nil
	}
	var errs field.ErrorList
	spec := field.NewPath("spec")
	for _, o := range others {
		if o.Name == s.Name || o.DeletionTimestamp != nil || modes.Effective(o) != deckhandv1alpha1.PolicyInjection || !sidecarcontrol.CanOverlap(s, o) {
			continue
		}
		why := func(what string) string {
			return fmt.Sprintf("SidecarSet %q, also in Policy mode and able to select the same pods, has %s of the same name: in Policy mode two SidecarSets cannot share one (keep it in one of them, or one of them in Webhook mode)", o.Name, what)
		}
		for i := range s.Spec.Volumes {
			for j := range o.Spec.Volumes {
				if s.Spec.Volumes[i].Name == o.Spec.Volumes[j].Name {
					errs = append(errs, field.Invalid(spec.Child("volumes").Index(i).Child("name"), s.Spec.Volumes[i].Name, why("a volume")))
				}
			}
		}
		for i := range s.Spec.ImagePullSecrets {
			for j := range o.Spec.ImagePullSecrets {
				if s.Spec.ImagePullSecrets[i].Name == o.Spec.ImagePullSecrets[j].Name {
					errs = append(errs, field.Invalid(spec.Child("imagePullSecrets").Index(i).Child("name"), s.Spec.ImagePullSecrets[i].Name, why("an image pull secret")))
				}
			}
		}
	}
	return errs
}

// validateModeServed refuses Webhook mode where the manager serves no pod
// webhook: nothing would inject the SidecarSet's pods.
func validateModeServed(s *deckhandv1alpha1.SidecarSet, modes sidecarcontrol.Modes) field.ErrorList {
	if !modes.WithoutPodWebhook || modes.Effective(s) != deckhandv1alpha1.WebhookInjection {
		return nil
	}
	if f := sidecarcontrol.WebhookOnlyField(&s.Spec); s.Spec.InjectionMode == "" && f != "" {
		// Such a SidecarSet takes the webhook even for a Policy default.
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "injectionMode"),
			f+" is injected only by the pod webhook, which this installation does not serve (--sidecarset-pod-webhook=false)")}
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "injectionMode"), s.Spec.InjectionMode,
		"this installation serves no pod webhook (--sidecarset-pod-webhook=false), so only Policy mode injects: set Policy or leave the field unset")}
}
