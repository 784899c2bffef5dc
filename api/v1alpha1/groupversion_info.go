// Package v1alpha1 contains the apps.deckhand.dev/v1alpha1 API: SidecarSet,
// PodSet, WebServer and RestartSchedule.
//
// +kubebuilder:object:generate=true
// +groupName=apps.deckhand.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every Deckhand kind.
	GroupVersion = schema.GroupVersion{Group: "apps.deckhand.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the Deckhand kinds with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Deckhand kinds to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
