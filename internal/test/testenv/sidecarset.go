package testenv

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/deckhand-dev/deckhand/internal/inject"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	sidecarsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/sidecarset"
)

// SidecarSetWebhooks registers the SidecarSet webhooks and the pod
// injection webhook with mgr, both reading SidecarSets through one Lister
// made with opts, and returns that Lister. A suite that runs the SidecarSet
// controller hands it the same Lister, as operator.Setup does, so that the
// controller and the webhooks see each SidecarSet compiled alike.
func SidecarSetWebhooks(mgr ctrl.Manager, opts sidecarcontrol.Options) (*sidecarcontrol.Lister, error) {
	lister, err := sidecarcontrol.ListerFromCache(context.Background(), mgr.GetCache(), opts)
	if err != nil {
		return nil, err
	}
	if err := sidecarsetwebhook.SetupWebhookWithLister(mgr, lister); err != nil {
		return nil, err
	}
	if err := inject.SetupWithManager(mgr, lister); err != nil {
		return nil, err
	}
	return lister, nil
}
