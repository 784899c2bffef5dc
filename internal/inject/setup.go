package inject

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// The injector reads SidecarSets and namespaces from the informer cache.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch,roleName=manager-sidecarset-role
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=sidecarsets,verbs=list;watch,roleName=manager-sidecarset-role
// The injector reads pinned revisions (ControllerRevisions in the manager's namespace).
// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=list;watch,roleName=manager-sidecarset-role

func init() {
	metrics.Registry.MustRegister(podsInjected, podInjectionErrors)
}

// SetupWithManager registers the pod injection webhook with mgr, reading
// SidecarSets through lister (which the SidecarSet controller and
// admission webhooks may share). A manager that serves no pod webhook
// (Modes.WithoutPodWebhook) registers nothing.
func SetupWithManager(mgr ctrl.Manager, lister *sidecarcontrol.Lister) error {
	if !lister.Modes().WithoutPodWebhook {
		mgr.GetWebhookServer().Register(PodWebhookPath, &Handler{Lister: lister})
	}
	return nil
}
