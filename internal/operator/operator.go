// Package operator registers Deckhand's controllers and admission webhooks
// with a controller-runtime manager. The manager binary, the in-process
// integration tests and the end-to-end tests all call Setup, so every test
// exercises the same wiring users run.
package operator

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	podsetctrl "github.com/deckhand-dev/deckhand/internal/controller/podset"
	restartschedulectrl "github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
	sidecarsetctrl "github.com/deckhand-dev/deckhand/internal/controller/sidecarset"
	webserverctrl "github.com/deckhand-dev/deckhand/internal/controller/webserver"
	"github.com/deckhand-dev/deckhand/internal/podcache"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	podsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/podset"
	restartschedulewebhook "github.com/deckhand-dev/deckhand/internal/webhook/restartschedule"
	sidecarsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/sidecarset"
	webserverwebhook "github.com/deckhand-dev/deckhand/internal/webhook/webserver"
)

// Options are the settings handed to the controllers and webhooks.
type Options struct {
	// DefaultRestartSchedule is the schedule given to a RestartSchedule
	// generated for a workload annotated "apps.deckhand.dev/restart-schedule: true".
	DefaultRestartSchedule string
}

// DefaultOptions returns the options the manager uses when no flag is set.
func DefaultOptions() Options {
	return Options{DefaultRestartSchedule: "0 3 * * *"}
}

// podSetRevisions selects the ControllerRevisions PodSets create.
var podSetRevisions = func() labels.Selector {
	req, err := labels.NewRequirement(deckhandv1alpha1.PodSetNameLabel, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}()

// CacheOptions is the informer-cache configuration every Deckhand manager uses.
func CacheOptions() cache.Options {
	// Controllers never read managedFields; dropping them from every cached
	// object saves memory on every kind. Pods, most of a cluster's objects,
	// are trimmed to the fields the controllers read (internal/podcache).
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Transform: podcache.Trim},
			// Only the PodSets' own revisions: StatefulSets and DaemonSets
			// keep theirs in the same kind, which Deckhand never reads.
			&appsv1.ControllerRevision{}: {Label: podSetRevisions},
		},
	}
}

// Setup registers every controller and webhook with mgr.
// Each kind's packages expose the same entry points, so this stays a list.
func Setup(mgr ctrl.Manager, opts Options) error {
	// The SidecarSet controller and the pod webhook read SidecarSets
	// through one Lister, so each SidecarSet is compiled once per process.
	sidecarSets, err := sidecarcontrol.ListerFromCache(context.Background(), mgr.GetCache())
	if err != nil {
		return err
	}
	for _, setup := range []func(ctrl.Manager) error{
		(&webserverctrl.Reconciler{}).SetupWithManager,
		webserverwebhook.SetupWebhookWithManager,
		(&restartschedulectrl.Reconciler{}).SetupWithManager,
		(&restartschedulectrl.AnnotationReconciler{DefaultSchedule: opts.DefaultRestartSchedule}).SetupWithManager,
		restartschedulewebhook.SetupWebhookWithManager,
		(&podsetctrl.Reconciler{}).SetupWithManager,
		podsetwebhook.SetupWebhookWithManager,
		(&sidecarsetctrl.Reconciler{Lister: sidecarSets}).SetupWithManager,
		func(mgr ctrl.Manager) error { return sidecarsetwebhook.SetupWebhookWithLister(mgr, sidecarSets) },
	} {
		if err := setup(mgr); err != nil {
			return err
		}
	}
	return nil
}
