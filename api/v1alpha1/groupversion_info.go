// Package v1alpha1 contains the apps.deckhand.dev/v1alpha1 API: SidecarSet,
// PodSet, WebServer and RestartSchedule.
//
// +kubebuilder:object:generate=true
// +groupName=apps.deckhand.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of every Deckhand kind.
	GroupVersion = schema.GroupVersion{Group: "apps.deckhand.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Deckhand kinds with a runtime.Scheme.
	SchemeBuilder = &schemeBuilder{}

	// AddToScheme adds the Deckhand kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// schemeBuilder collects the kinds of this group version, with
// apimachinery's SchemeBuilder only: an API package should import nothing
// beyond apimachinery.
type schemeBuilder struct{ runtime.SchemeBuilder }

// Register adds objs to the kinds AddToScheme registers.
func (b *schemeBuilder) Register(objs ...runtime.Object) {
	b.SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, objs...)
		metav1.AddToGroupVersion(s, GroupVersion)
		return nil
	})
}
