package webserver

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
	"github.com/deckhand-dev/deckhand/internal/statuspatch"
)

// Event reasons; a name conflict and a failed apply are announced with the
// reasons of the Degraded condition, ReasonNameConflict and ReasonApplyFailed.
const (
	ReasonDeploymentCreated = "DeploymentCreated"
	ReasonDeploymentUpdated = "DeploymentUpdated"
	ReasonServiceCreated    = "ServiceCreated"
	ReasonServiceUpdated    = "ServiceUpdated"
	ReasonReplicasReleased  = "ReplicasReleased"

	ReasonDisruptionBudgetCreated = "PodDisruptionBudgetCreated"
	ReasonDisruptionBudgetUpdated = "PodDisruptionBudgetUpdated"
	ReasonDisruptionBudgetDeleted = "PodDisruptionBudgetDeleted"
	ReasonIngressCreated          = "IngressCreated"
	ReasonIngressUpdated          = "IngressUpdated"
	ReasonIngressDeleted          = "IngressDeleted"
	ReasonRouteCreated            = "HTTPRouteCreated"
	ReasonRouteUpdated            = "HTTPRouteUpdated"
	ReasonRouteDeleted            = "HTTPRouteDeleted"
)

// childReasons are the Event reasons of creating and of updating each kind
// of child.
var childReasons = map[string]struct{ created, updated string }{
	"Deployment": {ReasonDeploymentCreated, ReasonDeploymentUpdated},
	"Service":    {ReasonServiceCreated, ReasonServiceUpdated},
	kindPDB:      {ReasonDisruptionBudgetCreated, ReasonDisruptionBudgetUpdated},
	kindIngress:  {ReasonIngressCreated, ReasonIngressUpdated},
	kindRoute:    {ReasonRouteCreated, ReasonRouteUpdated},
}

// Reconciler keeps a WebServer's Deployment and Service in line with its
// spec through server-side apply under the "deckhand" field manager.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server directly; used only to confirm
	// that a child is really missing before creating it.
	APIReader client.Reader
	// Recorder emits Events on WebServers.
	Recorder events.EventRecorder
	// Clock tells the time; nil means the real clock.
	Clock clock.PassiveClock
}

// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=webservers,verbs=get;list;watch,roleName=manager-webserver-role
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=webservers/status,verbs=patch,roleName=manager-webserver-role
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=webservers/finalizers,verbs=update,roleName=manager-webserver-role
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch,roleName=manager-webserver-role
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch,roleName=manager-webserver-role
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete,roleName=manager-webserver-role
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;patch;delete,roleName=manager-webserver-role
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the controller: it watches WebServers, the
// Deployments and Services they own, and Deployments and Services that carry
// a WebServer's name without being owned by it (so that a name conflict
// clears as soon as the other object goes away).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	reconcileutil.Defaults(mgr, "deckhand-webserver",
		reconcileutil.Fields{Client: &r.Client, APIReader: &r.APIReader, Recorder: &r.Recorder, Clock: &r.Clock})
	notOwned := predicate.NewPredicateFuncs(func(o client.Object) bool {
		ref := metav1.GetControllerOf(o)
		return ref == nil || ref.APIVersion != deckhandv1alpha1.GroupVersion.String() || ref.Kind != "WebServer"
	})
	b := reconcileutil.NewController(mgr, "webserver", Workers, &deckhandv1alpha1.WebServer{}, predicate.GenerationChangedPredicate{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Owns(&networkingv1.Ingress{}).
		Watches(&appsv1.Deployment{}, handler.EnqueueRequestsFromMapFunc(r.sameNameWebServer), builder.WithPredicates(notOwned)).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(r.sameNameWebServer), builder.WithPredicates(notOwned))
	// NOTE: HTTPRoutes are watched when the Gateway API is installed at
	// start; installed later, routes are still applied, and repaired at the
	// WebServer's next reconcile rather than at once.
	if gatewayAPIInstalled(mgr.GetRESTMapper()) {
		b = b.Owns(&gatewayv1.HTTPRoute{})
	}
	return b.Complete(r)
}

// Workers is the number of WebServers reconciled at once. A reconcile
// mostly waits for the API server (up to two reads, two applies and a status
// write, one after another), so a burst of new WebServers goes through at
// about Workers / (five round trips) a second until the API server itself is
// busy; a worker is only a goroutine while it waits. The benchmark's
// plain-client baseline creates Deployments and Services with as many
// workers (docs/benchmarks.md, item 5).
const Workers = 32

// sameNameWebServer maps a Deployment or Service that no WebServer controls
// to the WebServer of the same name, if there is one.
func (r *Reconciler) sameNameWebServer(ctx context.Context, o client.Object) []reconcile.Request {
	key := client.ObjectKeyFromObject(o)
	if err := r.Client.Get(ctx, key, &deckhandv1alpha1.WebServer{}); err != nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// scope is the state of one reconcile.
type scope struct {
	ws       *deckhandv1alpha1.WebServer
	observed observed
	// configHash is the hash of the content of spec.configVolumes
	// (readConfig), "" without them.
	configHash string
}

// Reconcile applies the Deployment, then the Service, then writes the status
// once. It is level-based: it never depends on which event woke it, and a
// second run right after the first sends no writes at all.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ws := &deckhandv1alpha1.WebServer{}
	if err := r.Client.Get(ctx, req.NamespacedName, ws); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ws.DeletionTimestamp.IsZero() {
		// The garbage collector removes the owned Deployment and Service.
		return ctrl.Result{}, nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("webserver", klog.KObj(ws)))
	s := &scope{ws: ws, observed: observed{now: r.Clock.Now()}}
	// Each child is applied even when the other failed; the status says
	// what happened to both.
	return reconcileutil.Run(ctx, s, reconcileutil.StopOnError(r.readConfig, r.reconcileDeployment), r.reconcileService, r.reconcileIngress, r.reconcileDisruptionBudget, r.patchStatus)
}

// reconcileDeployment applies the Deployment unless another object holds
// its name or it already matches.
func (r *Reconciler) reconcileDeployment(ctx context.Context, s *scope) (ctrl.Result, error) {
	ws := s.ws
	desired := func(ws *deckhandv1alpha1.WebServer) (*appsv1ac.DeploymentApplyConfiguration, error) {
		return desiredDeploymentWithConfig(ws, s.configHash)
	}
	return ctrl.Result{}, reconcileChild(ctx, r, s, "Deployment", &appsv1.Deployment{}, &appsv1.Deployment{}, &s.observed.deployment,
		desired, func(live *appsv1.Deployment, exists bool) error {
			if exists && ws.Spec.Replicas == nil && live.Annotations[deckhandv1alpha1.WebServerOwnsReplicasAnnotation] == "true" {
				return r.releaseReplicas(ctx, ws, live)
			}
			return nil
		})
}

// releaseReplicas hands a Deployment's spec.replicas, which Deckhand owned
// while the WebServer set spec.replicas, to a holding field manager. Without
// it, Deckhand's next apply (which no longer mentions replicas) would remove
// the field and the Deployment would shrink to the default of 1. The apply is
// not forced: if someone else changed replicas meanwhile, it conflicts and the
// reconcile is retried with fresher data.
func (r *Reconciler) releaseReplicas(ctx context.Context, ws *deckhandv1alpha1.WebServer, live *appsv1.Deployment) error {
	n := desiredReplicas(live)
	hold := appsv1ac.Deployment(live.Name, live.Namespace).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(n))
	if err := r.Client.Apply(ctx, hold, client.FieldOwner(deckhandv1alpha1.WebServerReplicasHandoffManager)); err != nil {
		return fmt.Errorf("releasing spec.replicas of Deployment %s: %w", klog.KObj(live), err)
	}
	r.Recorder.Eventf(ws, live, corev1.EventTypeNormal, ReasonReplicasReleased, "ReleaseReplicas",
		"spec.replicas is unset: Deployment %s keeps %d replicas and Deckhand no longer manages them", live.Name, n)
	return nil
}

// reconcileService applies the Service unless another object holds its name
// or it already matches.
func (r *Reconciler) reconcileService(ctx context.Context, s *scope) (ctrl.Result, error) {
	return ctrl.Result{}, reconcileChild(ctx, r, s, "Service", &corev1.Service{}, &corev1.Service{}, &s.observed.service, desiredService, nil)
}

// reconcileChild applies the child of kind that desired builds, unless
// another object holds its name or it already matches, and records in
// observed the child as it now stands. live and applied are empty objects
// of the child's type to read into; prepare, when set, runs between
// building the desired child and applying it.
func reconcileChild[T client.Object, A runtime.ApplyConfiguration](ctx context.Context, r *Reconciler, s *scope, kind string,
	live, applied T, observed *T, desired func(*deckhandv1alpha1.WebServer) (A, error), prepare func(live T, exists bool) error) error {
	exists, err := r.getChild(ctx, s.ws, kind, live, &s.observed)
	if err != nil || (exists && !metav1.IsControlledBy(live, s.ws)) {
		return err
	}
	want, err := desired(s.ws)
	if err != nil {
		return r.applyFailed(s, kind, err)
	}
	if prepare != nil {
		if err := prepare(live, exists); err != nil {
			return r.applyFailed(s, kind, err)
		}
	}
	changed, err := r.apply(ctx, s, kind, exists, live, want, applied)
	if err != nil {
		return err
	}
	if changed {
		*observed = applied
	} else {
		*observed = live
	}
	return nil
}

// getChild reads the child of the WebServer's name. A miss in the cache is
// confirmed against the API server, so that an object created a moment ago
// by someone else is never taken over by an apply. A child not controlled by
// the WebServer is recorded as a conflict.
func (r *Reconciler) getChild(ctx context.Context, ws *deckhandv1alpha1.WebServer, kind string, obj client.Object, o *observed) (bool, error) {
	key := types.NamespacedName{Namespace: ws.Namespace, Name: ws.Name}
	err := r.Client.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, obj)
	}
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		o.applyErrs = append(o.applyErrs, fmt.Sprintf("reading %s: %v", kind, err))
		return false, err
	}
	if !metav1.IsControlledBy(obj, ws) {
		o.conflicts = append(o.conflicts, fmt.Sprintf("%s %s/%s exists and is not controlled by this WebServer", kind, ws.Namespace, ws.Name))
		conflictsTotal.WithLabelValues(kind).Inc()
	}
	return true, nil
}

// apply server-side applies desired unless live already holds all of it.
// It reports whether the object changed, and decodes the API server's answer
// into applied. Events are emitted only for real changes and failures.
func (r *Reconciler) apply(ctx context.Context, s *scope, kind string, exists bool, live client.Object,
	desired runtime.ApplyConfiguration, applied client.Object) (bool, error) {
	if exists {
		ok, err := upToDate(desired, live)
		if err != nil {
			return false, r.applyFailed(s, kind, err)
		}
		if ok {
			appliesTotal.WithLabelValues(kind, "skipped").Inc()
			return false, nil
		}
	}
	if err := r.Client.Apply(ctx, desired, client.FieldOwner(deckhandv1alpha1.FieldManager), client.ForceOwnership); err != nil {
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// The namespace is going away with the WebServer in it; re-creating
			// a child the namespace controller already removed is neither
			// possible nor a failure worth an event.
			log.FromContext(ctx).V(1).Info("namespace is terminating, not applying", "kind", kind)
			return false, nil
		}
		return false, r.applyFailed(s, kind, err)
	}
	if err := convert(desired, applied); err != nil { // Apply decoded the answer into desired
		return false, r.applyFailed(s, kind, err)
	}
	logger := log.FromContext(ctx)
	switch {
	case !exists:
		appliesTotal.WithLabelValues(kind, "created").Inc()
		logger.Info("created", "kind", kind)
		r.Recorder.Eventf(s.ws, applied, corev1.EventTypeNormal, childReasons[kind].created, "Create", "Created %s %s", kind, applied.GetName())
	case applied.GetResourceVersion() != live.GetResourceVersion():
		appliesTotal.WithLabelValues(kind, "updated").Inc()
		what := "applied the WebServer's spec"
		if live.GetAnnotations()[deckhandv1alpha1.WebServerAppliedHashAnnotation] == applied.GetAnnotations()[deckhandv1alpha1.WebServerAppliedHashAnnotation] {
			what = "restored fields Deckhand owns that were changed by hand"
		}
		logger.Info("updated", "kind", kind, "reason", what)
		r.Recorder.Eventf(s.ws, applied, corev1.EventTypeNormal, childReasons[kind].updated, "Update", "Updated %s %s: %s", kind, applied.GetName(), what)
	default:
		// The API server found nothing to change (for example only the
		// order of a list differed): no event.
		appliesTotal.WithLabelValues(kind, "unchanged").Inc()
	}
	return true, nil
}

func (r *Reconciler) applyFailed(s *scope, kind string, err error) error {
	appliesTotal.WithLabelValues(kind, "error").Inc()
	s.observed.applyErrs = append(s.observed.applyErrs, fmt.Sprintf("applying %s: %v", kind, err))
	r.Recorder.Eventf(s.ws, nil, corev1.EventTypeWarning, ReasonApplyFailed, "Apply", "Applying %s %s failed: %v", kind, s.ws.Name, err)
	return fmt.Errorf("applying %s: %w", kind, err)
}

// patchStatus writes the status if it changed, and announces a new name
// conflict once (not on every reconcile while it lasts).
func (r *Reconciler) patchStatus(ctx context.Context, s *scope) (ctrl.Result, error) {
	ws := s.ws
	st := computeStatus(ws, s.observed)
	before := meta.FindStatusCondition(ws.Status.Conditions, deckhandv1alpha1.WebServerDegradedCondition)
	after := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.WebServerDegradedCondition)
	if after != nil && after.Reason == ReasonNameConflict && (before == nil || before.Reason != ReasonNameConflict || before.Message != after.Message) {
		r.Recorder.Eventf(ws, nil, corev1.EventTypeWarning, ReasonNameConflict, "Reconcile", "%s", after.Message)
	}
	return statuspatch.Writer{Client: r.Client, FieldManager: deckhandv1alpha1.FieldManager}.Status(ctx, ws, &st)
}
