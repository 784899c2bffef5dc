package sidecarset

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// Defaulter fills in a SidecarSet's defaults: the strategy defaults and,
// for every container, the defaults the API server gives a pod's
// containers, so that the SidecarSet shows what pods will actually run.
type Defaulter struct{}

// Default implements admission.Defaulter.
func (Defaulter) Default(_ context.Context, s *deckhandv1alpha1.SidecarSet) error {
	SetDefaults(s)
	return nil
}

// SetDefaults applies the SidecarSet defaults to s. It is idempotent.
func SetDefaults(s *deckhandv1alpha1.SidecarSet) {
	for i := range s.Spec.InitContainers {
		defaultSidecar(&s.Spec.InitContainers[i])
	}
	for i := range s.Spec.Containers {
		defaultSidecar(&s.Spec.Containers[i])
	}
	for i := range s.Spec.Volumes {
		defaultVolume(&s.Spec.Volumes[i])
	}
	us := &s.Spec.UpdateStrategy
	if us.Type == "" {
		us.Type = deckhandv1alpha1.RollingUpdateSidecarSetStrategy
	}
	if us.Recreate == "" {
		us.Recreate = deckhandv1alpha1.RecreateNever
	}
	if us.MaxUnavailable == nil {
		one := intstr.FromInt32(1)
		us.MaxUnavailable = &one
	}
}

func defaultSidecar(sc *deckhandv1alpha1.SidecarContainer) {
	if sc.PodInjectPolicy == "" {
		sc.PodInjectPolicy = deckhandv1alpha1.BeforeAppContainer
	}
	if sc.ShareVolumePolicy.Type == "" {
		sc.ShareVolumePolicy.Type = deckhandv1alpha1.ShareVolumePolicyDisabled
	}
	defaultContainer(&sc.Container)
}

// defaultContainer applies what the API server's defaulting does to a pod's
// container (k8s.io/kubernetes/pkg/apis/core/v1/defaults.go).
func defaultContainer(c *corev1.Container) {
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = defaultPullPolicy(c.Image)
	}
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	for i := range c.Ports {
		if c.Ports[i].Protocol == "" {
			c.Ports[i].Protocol = corev1.ProtocolTCP
		}
	}
	for i := range c.Env {
		if vf := c.Env[i].ValueFrom; vf != nil && vf.FieldRef != nil && vf.FieldRef.APIVersion == "" {
			vf.FieldRef.APIVersion = "v1"
		}
	}
	// Requests default to limits, as for a pod.
	for name, limit := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; !ok {
			if c.Resources.Requests == nil {
				c.Resources.Requests = corev1.ResourceList{}
			}
			c.Resources.Requests[name] = limit.DeepCopy()
		}
	}
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		defaultProbe(p)
	}
	if c.Lifecycle != nil {
		defaultHandler(c.Lifecycle.PostStart)
		defaultHandler(c.Lifecycle.PreStop)
	}
}

func defaultPullPolicy(image string) corev1.PullPolicy {
	if strings.Contains(image, "@") {
		return corev1.PullIfNotPresent
	}
	name := image
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.LastIndex(name, ":"); i < 0 || name[i+1:] == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

func defaultProbe(p *corev1.Probe) {
	if p == nil {
		return
	}
	if p.TimeoutSeconds == 0 {
		p.TimeoutSeconds = 1
	}
	if p.PeriodSeconds == 0 {
		p.PeriodSeconds = 10
	}
	if p.SuccessThreshold == 0 {
		p.SuccessThreshold = 1
	}
	if p.FailureThreshold == 0 {
		p.FailureThreshold = 3
	}
	if p.HTTPGet != nil {
		defaultHTTPGet(p.HTTPGet)
	}
	if p.GRPC != nil && p.GRPC.Service == nil {
		empty := ""
		p.GRPC.Service = &empty
	}
}

func defaultHandler(h *corev1.LifecycleHandler) {
	if h != nil && h.HTTPGet != nil {
		defaultHTTPGet(h.HTTPGet)
	}
}

func defaultHTTPGet(g *corev1.HTTPGetAction) {
	if g.Path == "" {
		g.Path = "/"
	}
	if g.Scheme == "" {
		g.Scheme = corev1.URISchemeHTTP
	}
}

func defaultVolume(v *corev1.Volume) {
	mode := int32(corev1.ConfigMapVolumeSourceDefaultMode)
	switch {
	case v.ConfigMap != nil && v.ConfigMap.DefaultMode == nil:
		v.ConfigMap.DefaultMode = &mode
	case v.Secret != nil && v.Secret.DefaultMode == nil:
		v.Secret.DefaultMode = &mode
	case v.DownwardAPI != nil && v.DownwardAPI.DefaultMode == nil:
		v.DownwardAPI.DefaultMode = &mode
	case v.Projected != nil && v.Projected.DefaultMode == nil:
		v.Projected.DefaultMode = &mode
	}
	if v.HostPath != nil && v.HostPath.Type == nil {
		t := corev1.HostPathUnset
		v.HostPath.Type = &t
	}
}
