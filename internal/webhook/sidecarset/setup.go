package sidecarset

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/webhook/webhookutil"
)

// The SidecarSet webhooks use failurePolicy Fail: a SidecarSet that escaped
// validation could inject broken containers into every pod it selects,
// while SidecarSet writes are rare enough to wait for Deckhand to be back.
//
// +kubebuilder:webhook:path=/mutate-apps-deckhand-dev-v1alpha1-sidecarset,mutating=true,failurePolicy=fail,sideEffects=None,groups=apps.deckhand.dev,resources=sidecarsets,verbs=create;update,versions=v1alpha1,name=msidecarset.apps.deckhand.dev,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/validate-apps-deckhand-dev-v1alpha1-sidecarset,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps.deckhand.dev,resources=sidecarsets,verbs=create;update,versions=v1alpha1,name=vsidecarset.apps.deckhand.dev,admissionReviewVersions=v1

// The validator dry-runs pods.
// +kubebuilder:rbac:groups="",resources=pods,verbs=create,roleName=manager-sidecarset-role

// DryRunNamespace is the namespace the synthetic validation pods are
// dry-run in; it exists in every cluster.
const DryRunNamespace = "default"

// SetupWebhookWithManager registers the SidecarSet defaulting and
// validating webhooks with mgr, reading SidecarSets through a Lister of
// their own. The pod injection webhook is internal/inject's.
func SetupWebhookWithManager(mgr ctrl.Manager) error {
	lister, err := sidecarcontrol.ListerFromCache(context.Background(), mgr.GetCache(), sidecarcontrol.Options{Revisions: mgr})
	if err != nil {
		return err
	}
	return SetupWebhookWithLister(mgr, lister)
}

// SetupWebhookWithLister registers the same webhooks reading SidecarSets
// through lister, which the SidecarSet controller and the pod injection
// webhook may share.
func SetupWebhookWithLister(mgr ctrl.Manager, lister *sidecarcontrol.Lister) error {
	return ctrl.NewWebhookManagedBy(mgr, &deckhandv1alpha1.SidecarSet{}).
		WithDefaulter(Defaulter{}).
		WithValidator(webhookutil.CreateOrUpdate[*deckhandv1alpha1.SidecarSet]((&Validator{
			Lister:            lister,
			DryRun:            &PodDryRunner{Client: mgr.GetClient(), Namespace: DryRunNamespace},
			MetadataAllowlist: lister.PodMetadataAllowlist(),
			LabelAllowlist:    lister.PodLabelAllowlist(),
		}).Validate)).
		Complete()
}
