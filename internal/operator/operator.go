// Package operator registers Deckhand's controllers and admission webhooks
// with a controller-runtime manager. The manager binary, the in-process
// integration tests and the end-to-end tests all call Setup, so every test
// exercises the same wiring users run.
package operator

import (
	"context"
	"fmt"
	"time"

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
	sidecarpolicyctrl "github.com/deckhand-dev/deckhand/internal/controller/sidecarpolicy"
	sidecarsetctrl "github.com/deckhand-dev/deckhand/internal/controller/sidecarset"
	webserverctrl "github.com/deckhand-dev/deckhand/internal/controller/webserver"
	"github.com/deckhand-dev/deckhand/internal/cronschedule"
	"github.com/deckhand-dev/deckhand/internal/inject"
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
	// SidecarSetInjectionMode is the injection mode of SidecarSets that
	// leave spec.injectionMode unset (Webhook when empty).
	SidecarSetInjectionMode deckhandv1alpha1.InjectionMode
	// SidecarSetPodMetadataAllowlist are the annotation keys (or glob
	// patterns such as "example.com/*") SidecarSets may set on the pods they
	// inject (spec.patchPodMetadata); empty allows none.
	SidecarSetPodMetadataAllowlist []string
	// SidecarSetPodLabelAllowlist are the label keys (or glob patterns)
	// SidecarSets may set on the pods they inject; empty allows none.
	SidecarSetPodLabelAllowlist []string
	// PolicyAPIServed, when set, replaces the discovery of whether the API
	// server serves MutatingAdmissionPolicies (tests force a fallback).
	PolicyAPIServed *bool
	// SidecarSetPodWebhook serves the pod injection webhook. Without it
	// Deckhand is off the pod create path: every SidecarSet must be in
	// Policy mode, which must then be the default and served.
	SidecarSetPodWebhook bool
	// Namespace is the manager's own namespace (cmd/deckhand reads it from
	// POD_NAMESPACE or its service account; "": deckhand-system): where
	// SidecarSets' ControllerRevisions live, and always protected.
	Namespace string
	// ProtectedNamespaces are the namespaces no SidecarSet injects or
	// updates, besides kube-system and Deckhand's own, which always are
	// (nil: sidecarcontrol.DefaultProtectedNamespaces).
	ProtectedNamespaces []string
	// ManagerUser is the username the API server gives the manager's
	// requests; "" asks it (a SelfSubjectReview).
	ManagerUser string
	// RestartScheduleMinInterval is the shortest time allowed between two
	// runs of a RestartSchedule, from 1s to 1m (only "@every" fires more
	// often than once a minute).
	RestartScheduleMinInterval time.Duration
	// MaxPodSetReplicas is the most pods a PodSet may ask for, through its
	// spec or its scale subresource.
	MaxPodSetReplicas int32
	// SidecarSetPolicyInjection lets SidecarSets in Policy mode be injected
	// by the MutatingAdmissionPolicies Deckhand writes. Off, Deckhand needs
	// no permission on those policies (the installation grants it none)
	// and the pod webhook injects every SidecarSet. A Policy default
	// (SidecarSetInjectionMode) turns it on.
	SidecarSetPolicyInjection bool
	// Controllers are the kinds the manager runs (nil: every kind).
	Controllers Controllers
}

// DefaultOptions returns the options the manager uses when no flag is set.
func DefaultOptions() Options {
	return Options{DefaultRestartSchedule: "0 3 * * *", SidecarSetInjectionMode: deckhandv1alpha1.WebhookInjection, SidecarSetPodWebhook: true,
		RestartScheduleMinInterval: cronschedule.DefaultMinInterval, MaxPodSetReplicas: podsetwebhook.DefaultMaxReplicas}
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

// Setup registers the controllers and webhooks of the kinds opts.Controllers
// names with mgr, and a refusal on the webhook paths of the others. A kind
// left out starts nothing that reads its objects: no informer of a type
// only it reads is ever started (controller-runtime starts an informer on
// the first read of a type through the cache).
func Setup(mgr ctrl.Manager, opts Options) error {
	if err := checkBounds(opts); err != nil {
		return err
	}
	on := opts.Controllers
	ctrl.Log.WithName("setup").Info("controllers", "enabled", on.String())
	var setups []func(ctrl.Manager) error
	if on.Enabled(WebServerController) {
		setups = append(setups,
			(&webserverctrl.Reconciler{}).SetupWithManager,
			webserverwebhook.SetupWebhookWithManager)
	}
	if on.Enabled(RestartScheduleController) {
		setups = append(setups,
			(&restartschedulectrl.Reconciler{}).SetupWithManager,
			(&restartschedulectrl.AnnotationReconciler{DefaultSchedule: opts.DefaultRestartSchedule}).SetupWithManager,
			func(mgr ctrl.Manager) error {
				return restartschedulewebhook.SetupWebhook(mgr, &restartschedulewebhook.Validator{MinInterval: opts.RestartScheduleMinInterval})
			})
	}
	if on.Enabled(PodSetController) {
		setups = append(setups,
			(&podsetctrl.Reconciler{}).SetupWithManager,
			func(mgr ctrl.Manager) error {
				return podsetwebhook.SetupWebhook(mgr, &podsetwebhook.Validator{MaxReplicas: opts.MaxPodSetReplicas})
			})
	}
	if on.Enabled(SidecarSetController) {
		sidecarSets, err := sidecarSetLister(mgr, opts)
		if err != nil {
			return err
		}
		setups = append(setups,
			(&sidecarsetctrl.Reconciler{Lister: sidecarSets}).SetupWithManager,
			func(mgr ctrl.Manager) error { return sidecarsetwebhook.SetupWebhookWithLister(mgr, sidecarSets) },
			func(mgr ctrl.Manager) error { return inject.SetupWithManager(mgr, sidecarSets) },
			(&sidecarpolicyctrl.Reconciler{Lister: sidecarSets}).SetupWithManager)
	}
	for _, setup := range setups {
		if err := setup(mgr); err != nil {
			return err
		}
	}
	refuseDisabled(mgr, on)
	return nil
}

// sidecarSetLister is the one Lister the SidecarSet controller, its
// webhook, the pod webhook and the policy controller read SidecarSets
// through, so each SidecarSet is compiled once per process. SidecarSets'
// ControllerRevisions live in a cache of their own (the manager's keeps
// PodSets' only): the controller keeps the history, the pod webhook and the
// policy controller inject pinned revisions.
func sidecarSetLister(mgr ctrl.Manager, opts Options) (*sidecarcontrol.Lister, error) {
	modes, err := injectionModes(mgr, opts)
	if err != nil {
		return nil, err
	}
	allow, err := sidecarcontrol.ParseMetadataAllowlist(opts.SidecarSetPodMetadataAllowlist)
	if err != nil {
		return nil, err
	}
	labelAllow, err := sidecarcontrol.ParseMetadataAllowlist(opts.SidecarSetPodLabelAllowlist)
	if err != nil {
		return nil, err
	}
	if opts.ManagerUser == "" {
		opts.ManagerUser = managerUser(mgr.GetConfig())
	}
	return sidecarcontrol.ListerFromCache(context.Background(), mgr.GetCache(), sidecarcontrol.Options{
		Modes:               modes,
		PodMetadata:         sidecarcontrol.PodMetadataAllowlists{Annotations: allow, Labels: labelAllow},
		ManagerUser:         opts.ManagerUser,
		Namespace:           opts.Namespace,
		ProtectedNamespaces: opts.ProtectedNamespaces,
		Revisions:           mgr,
	})
}

// checkBounds refuses limits that would not hold what they say. Zero
// keeps a default.
func checkBounds(opts Options) error {
	if d := opts.RestartScheduleMinInterval; d != 0 && (d < time.Second || d > time.Minute) {
		return fmt.Errorf("--restart-schedule-min-interval=%s: want between 1s and 1m (a 5-field schedule can fire once a minute)", d)
	}
	if opts.MaxPodSetReplicas < 0 {
		return fmt.Errorf("--max-podset-replicas=%d: want a positive number", opts.MaxPodSetReplicas)
	}
	return nil
}

// injectionModes finds out, once at start, whether the API server serves
// MutatingAdmissionPolicies, and says so in the log when a SidecarSet
// cannot be injected by policy.
func injectionModes(mgr ctrl.Manager, opts Options) (sidecarcontrol.Modes, error) {
	m := sidecarcontrol.Modes{Default: opts.SidecarSetInjectionMode, WithoutPodWebhook: !opts.SidecarSetPodWebhook}
	switch m.Default {
	case "", deckhandv1alpha1.WebhookInjection, deckhandv1alpha1.PolicyInjection:
	default:
		return m, fmt.Errorf("unknown SidecarSet injection mode %q: want Webhook or Policy", m.Default)
	}
	switch {
	case !opts.SidecarSetPolicyInjection && m.Default != deckhandv1alpha1.PolicyInjection:
		// No permission on the policies is granted in this mode: never ask
		// for them, and never watch them.
		m.PolicyOff = true
	case opts.PolicyAPIServed != nil:
		m.PolicyServed = *opts.PolicyAPIServed
	default:
		served, err := sidecarpolicyctrl.PolicyAPIServed(mgr.GetConfig())
		if err != nil {
			return m, fmt.Errorf("asking the API server whether it serves MutatingAdmissionPolicies: %w", err)
		}
		m.PolicyServed = served
	}
	if m.WithoutPodWebhook {
		// Without the webhook nothing could inject a SidecarSet that is not
		// in Policy mode: refuse to start rather than admit pods bare.
		if m.Default != deckhandv1alpha1.PolicyInjection {
			return m, fmt.Errorf("--sidecarset-pod-webhook=false needs --sidecarset-injection-mode=Policy: without the pod webhook only Policy mode injects")
		}
		if !m.PolicyServed {
			return m, fmt.Errorf("--sidecarset-pod-webhook=false needs an API server that serves admissionregistration.k8s.io/v1 MutatingAdmissionPolicies (Kubernetes 1.36 or later); this one does not")
		}
	}
	log := ctrl.Log.WithName("setup")
	switch {
	case m.PolicyOff:
		log.Info("policy injection is off (--sidecarset-policy-injection=false): the pod webhook injects every SidecarSet, Policy mode included (their InjectionPolicyReady condition says so)")
	case m.PolicyServed:
		log.Info("the API server serves MutatingAdmissionPolicies: SidecarSets in Policy mode are injected by the API server", "defaultInjectionMode", m.Effective(&deckhandv1alpha1.SidecarSet{}))
	default:
		log.Info("the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicies (Kubernetes 1.36 or later): SidecarSets in Policy mode fall back to the pod webhook (their InjectionPolicyReady condition says so)", "defaultInjectionMode", m.Effective(&deckhandv1alpha1.SidecarSet{}))
	}
	return m, nil
}
