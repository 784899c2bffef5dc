package sidecarset

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestSetDefaultsIdempotent(t *testing.T) {
	s := set("a", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "proxy"
		s.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{}}}
		s.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	})
	SetDefaults(s)
	c := s.Spec.Containers[0]
	if c.ImagePullPolicy != corev1.PullAlways || c.TerminationMessagePolicy != corev1.TerminationMessageReadFile ||
		c.ReadinessProbe.PeriodSeconds != 10 || c.ReadinessProbe.HTTPGet.Scheme != corev1.URISchemeHTTP ||
		c.Resources.Requests.Cpu().String() != "1" || c.PodInjectPolicy != deckhandv1alpha1.BeforeAppContainer ||
		s.Spec.UpdateStrategy.Type != deckhandv1alpha1.RollingUpdateSidecarSetStrategy || s.Spec.UpdateStrategy.MaxUnavailable.IntValue() != 1 {
		t.Errorf("defaults not applied: %+v %+v", c, s.Spec.UpdateStrategy)
	}
	again := s.DeepCopy()
	SetDefaults(again)
	if !apiequality.Semantic.DeepEqual(s, again) {
		t.Errorf("defaulting is not idempotent")
	}
	for image, want := range map[string]corev1.PullPolicy{
		"nginx": corev1.PullAlways, "nginx:latest": corev1.PullAlways, "nginx:1.27": corev1.PullIfNotPresent,
		"localhost:5000/nginx": corev1.PullAlways, "localhost:5000/nginx:1": corev1.PullIfNotPresent, "nginx@sha256:abc": corev1.PullIfNotPresent,
	} {
		if got := defaultPullPolicy(image); got != want {
			t.Errorf("defaultPullPolicy(%q) = %s, want %s", image, got, want)
		}
	}
}

func TestMapCauses(t *testing.T) {
	s := set("a", func(s *deckhandv1alpha1.SidecarSet) {})
	errs := mapCauses(s, []metav1.StatusCause{
		{Type: metav1.CauseTypeFieldValueInvalid, Field: "spec.containers[0].ports[0].containerPort", Message: "Invalid value: 70000: must be between 1 and 65535, inclusive"},
		{Type: metav1.CauseTypeFieldValueRequired, Field: "spec.containers[1].image", Message: "Required value"},
		{Type: metav1.CauseTypeFieldValueInvalid, Field: "metadata.name", Message: "Invalid value: \"x\": bad"},
	})
	want := []string{
		"spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
		"spec: Required value", // a cause about a container the SidecarSet does not have (the placeholder)
		"spec: Invalid value: \"x\": bad",
	}
	for i, e := range errs {
		if e.Error() != want[i] {
			t.Errorf("error %d = %q, want %q", i, e.Error(), want[i])
		}
	}
}
