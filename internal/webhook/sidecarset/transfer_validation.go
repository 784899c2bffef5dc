package sidecarset

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// validateTransferEnv checks a sidecar's transferEnv entries (exactly one
// source, exactly one of envName and envNames, a supported fieldRef) and
// its shareVolumeDevicePolicy; cp is the sidecar's path.
func validateTransferEnv(c *deckhandv1alpha1.SidecarContainer, cp *field.Path) field.ErrorList {
	var errs field.ErrorList
	for j, t := range c.TransferEnv {
		tp := cp.Child("transferEnv").Index(j)
		switch {
		case t.SourceContainerName == "" && t.SourceContainerNameFrom == nil:
			errs = append(errs, field.Required(tp.Child("sourceContainerName"), "one of sourceContainerName and sourceContainerNameFrom is required"))
		case t.SourceContainerName != "" && t.SourceContainerNameFrom != nil:
			errs = append(errs, field.Forbidden(tp.Child("sourceContainerNameFrom"), "may not be set together with sourceContainerName"))
		case t.SourceContainerNameFrom != nil:
			fp := tp.Child("sourceContainerNameFrom", "fieldRef")
			if t.SourceContainerNameFrom.FieldRef == nil {
				errs = append(errs, field.Required(fp, ""))
			} else if _, _, err := sidecarcontrol.ParseMetadataFieldPath(t.SourceContainerNameFrom.FieldRef.FieldPath); err != nil {
				errs = append(errs, field.Invalid(fp.Child("fieldPath"), t.SourceContainerNameFrom.FieldRef.FieldPath, err.Error()))
			}
		}
		switch {
		case t.EnvName == "" && len(t.EnvNames) == 0:
			errs = append(errs, field.Required(tp.Child("envName"), "one of envName and envNames is required"))
		case t.EnvName != "" && len(t.EnvNames) > 0:
			errs = append(errs, field.Forbidden(tp.Child("envNames"), "may not be set together with envName"))
		}
		for k, n := range t.EnvNames {
			if n == "" {
				errs = append(errs, field.Required(tp.Child("envNames").Index(k), ""))
			}
		}
	}
	if p := c.ShareVolumeDevicePolicy; p != nil {
		switch p.Type {
		case "", deckhandv1alpha1.ShareVolumePolicyEnabled, deckhandv1alpha1.ShareVolumePolicyDisabled:
		default:
			errs = append(errs, field.NotSupported(cp.Child("shareVolumeDevicePolicy", "type"), p.Type, []string{
				string(deckhandv1alpha1.ShareVolumePolicyEnabled), string(deckhandv1alpha1.ShareVolumePolicyDisabled)}))
		}
	}
	return errs
}

// transferPolicyUnsupported lists the transferEnv and volume device fields
// the compiled MutatingAdmissionPolicy does not inject.
func transferPolicyUnsupported(s *deckhandv1alpha1.SidecarSet) field.ErrorList {
	var errs field.ErrorList
	eachSidecar(s, func(c *deckhandv1alpha1.SidecarContainer, cp *field.Path) {
		for j, t := range c.TransferEnv {
			tp := cp.Child("transferEnv").Index(j)
			if len(t.EnvNames) > 0 {
				errs = append(errs, field.Forbidden(tp.Child("envNames"), "spec.injectionMode: Policy does not support "+tp.Child("envNames").String()+" (use envName, one entry per variable, or injectionMode Webhook)"))
			}
			if t.SourceContainerNameFrom != nil {
				errs = append(errs, field.Forbidden(tp.Child("sourceContainerNameFrom"), "spec.injectionMode: Policy does not support "+tp.Child("sourceContainerNameFrom").String()+" (use sourceContainerName, or injectionMode Webhook)"))
			}
		}
		if sharesDevices(c) {
			errs = append(errs, field.Forbidden(cp.Child("shareVolumeDevicePolicy"), "spec.injectionMode: Policy does not support "+cp.Child("shareVolumeDevicePolicy").String()+" (use injectionMode Webhook)"))
		}
	})
	return errs
}

func sharesDevices(c *deckhandv1alpha1.SidecarContainer) bool {
	return c.ShareVolumeDevicePolicy != nil && c.ShareVolumeDevicePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled
}
