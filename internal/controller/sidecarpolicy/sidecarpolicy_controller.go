package sidecarpolicy

import (
	"context"
	"fmt"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/sidecarpolicy"
	"github.com/deckhand-dev/deckhand/internal/statuspatch"
)

// Reasons of the InjectionPolicyReady condition (and of its Events).
const (
	// ReasonPolicyInPlace: the policy and binding inject the current spec.
	ReasonPolicyInPlace = "PolicyInPlace"
	// ReasonPolicyAPIUnavailable: the API server does not serve
	// MutatingAdmissionPolicies, or policy injection is off in this
	// installation; the webhook injects the SidecarSet instead.
	ReasonPolicyAPIUnavailable = "PolicyAPIUnavailable"
	// ReasonPolicyApplyFailed: the API server refused the policy or binding
	// (the message says why); the previous policy, if any, stays in place.
	ReasonPolicyApplyFailed = "PolicyApplyFailed"
	// ReasonPolicyNameTaken: an object Deckhand does not own has the
	// policy's name; Deckhand leaves it alone.
	ReasonPolicyNameTaken = "PolicyNameTaken"
)

// FieldManager is the field manager of the compiled policies, their
// bindings and the InjectionPolicyReady condition.
const FieldManager = "deckhand-sidecarpolicy"

// Reconciler keeps, for every SidecarSet in Policy mode, the
// MutatingAdmissionPolicy and binding that inject it, owned by the
// SidecarSet (so that they go with it), and removes them when the
// SidecarSet leaves Policy mode.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// Recorder emits Events on SidecarSets.
	Recorder events.EventRecorder
	// Lister reads SidecarSets (the policy of one depends on its peers) and
	// the injection modes.
	Lister *sidecarcontrol.Lister
	// Options are the compilation's cluster facts; OptionsOf(Lister) if zero.
	Options *sidecarpolicy.Options

	// backoff is, per SidecarSet whose policy is not in effect yet, the
	// wait before its next probe.
	backoffMu sync.Mutex
	backoff   map[string]time.Duration
	// verified is, per SidecarSet, the resourceVersions of the policy and
	// binding a dry-run pod showed in effect, and the condition it led to.
	verified map[string]verified
}

// Policies and bindings are written by server-side apply (patch, and
// create: an apply that creates the object is authorized as a create), deleted
// when a SidecarSet leaves Policy mode, and watched so that an edit or
// deletion by hand is undone. Neither names a paramKind or paramRef, so
// the API server asks for no permission on parameter resources.
// blockOwnerDeletion in their owner reference needs update on the
// SidecarSet's finalizers (OwnerReferencesPermissionEnforcement).
// These go to a role of their own, granted only where policy injection is
// on (--sidecarset-policy-injection; config/components/policy-injection).
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingadmissionpolicies;mutatingadmissionpolicybindings,verbs=list;watch;create;patch;delete,roleName=manager-policy-role
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=sidecarsets,verbs=list;watch,roleName=manager-sidecarset-role
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=sidecarsets/status,verbs=patch,roleName=manager-sidecarset-role
// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=sidecarsets/finalizers,verbs=update,roleName=manager-sidecarset-role
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// pinRetry is how often a pinned revision the cache does not show is
// looked for again.
const pinRetry = 5 * time.Second

// SetupWithManager registers the controller with mgr. The policies and
// bindings are watched only where the API server serves them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	reconcileutil.Defaults(mgr, "deckhand-sidecarpolicy", reconcileutil.Fields{Client: &r.Client, Recorder: &r.Recorder})
	if r.Lister == nil {
		return fmt.Errorf("sidecarpolicy: the Reconciler needs the SidecarSet Lister")
	}
	if r.Options == nil {
		o := sidecarpolicy.OptionsOf(r.Lister)
		r.Options = &o
	}
	// A SidecarSet's policy depends on its peers' names and containers:
	// any SidecarSet event reconciles every SidecarSet (there are few).
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		for _, s := range r.Lister.All() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: s.Name}})
		}
		return reqs
	})
	b := ctrl.NewControllerManagedBy(mgr).
		Named("sidecarpolicy").
		For(&deckhandv1alpha1.SidecarSet{}).
		Watches(&deckhandv1alpha1.SidecarSet{}, all)
	if r.Lister.Modes().PolicyServed {
		b = b.Owns(&admissionregistrationv1.MutatingAdmissionPolicy{}).
			Owns(&admissionregistrationv1.MutatingAdmissionPolicyBinding{})
	}
	return b.Complete(r)
}

// Reconcile brings one SidecarSet's policy and binding (and its
// InjectionPolicyReady condition) in line with its spec and mode.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &deckhandv1alpha1.SidecarSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, s); err != nil {
		// Deleted: the garbage collector deletes what it owned.
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if s.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	modes := r.Lister.Modes()
	if modes.Effective(s) != deckhandv1alpha1.PolicyInjection {
		if modes.PolicyServed {
			if err := r.deleteOwned(ctx, s); err != nil {
				return ctrl.Result{}, err
			}
		}
		return r.setCondition(ctx, s, nil)
	}
	if modes.PolicyOff {
		return r.setCondition(ctx, s, &metav1.Condition{
			Status: metav1.ConditionFalse, Reason: ReasonPolicyAPIUnavailable,
			Message: "policy injection is off in this installation (--sidecarset-policy-injection=false): the pod webhook injects this SidecarSet instead",
		})
	}
	if !modes.PolicyServed {
		return r.setCondition(ctx, s, &metav1.Condition{
			Status: metav1.ConditionFalse, Reason: ReasonPolicyAPIUnavailable,
			Message: "the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicies (Kubernetes 1.36 or later): the pod webhook injects this SidecarSet instead",
		})
	}
	var peers []*deckhandv1alpha1.SidecarSet
	for _, o := range r.Lister.All() {
		if o.Name != s.Name && o.DeletionTimestamp == nil && modes.ByPolicy(o) && sidecarcontrol.CanOverlap(s, o) {
			peers = append(peers, o)
		}
	}
	// A pinned revision (injectionStrategy.revision, policy Always) is
	// compiled in place of the current spec's containers. One the cache does
	// not show (yet) compiles the latest, as the webhook would inject, and
	// is looked for again shortly: no event announces its arrival here.
	injected, found := r.Lister.PolicyInjection(s)
	policy, binding := sidecarpolicy.Compile(injected, peers, *r.Options)
	cond, err := r.apply(ctx, s, policy, binding)
	// The API server loads a written policy asynchronously: it is ready
	// only once a pod admitted now gets the current revision.
	var retry time.Duration
	if err == nil && cond.Status == metav1.ConditionTrue {
		cond, retry, err = r.verify(ctx, s, policy.Annotations[sidecarpolicy.RevisionAnnotation], policy.ResourceVersion+"/"+binding.ResourceVersion, cond)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if res, err := r.setCondition(ctx, s, cond); err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	if !found && (retry == 0 || retry > pinRetry) {
		retry = pinRetry
	}
	return ctrl.Result{RequeueAfter: retry}, nil
}

// apply writes the policy, then its binding, and returns the condition
// that reports the outcome. A refusal by the API server is reported, not
// retried: only a spec change can change the answer.
func (r *Reconciler) apply(ctx context.Context, s *deckhandv1alpha1.SidecarSet, objs ...client.Object) (*metav1.Condition, error) {
	for _, obj := range objs {
		cur := obj.DeepCopyObject().(client.Object)
		err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur)
		if err == nil && !metav1.IsControlledBy(cur, s) {
			return &metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonPolicyNameTaken,
				Message: fmt.Sprintf("%s %s exists and is not owned by this SidecarSet; Deckhand leaves it alone", kindOf(obj), obj.GetName())}, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err := controllerutil.SetControllerReference(s, obj, r.Client.Scheme()); err != nil {
			return nil, err
		}
		u, err := toApply(obj)
		if err != nil {
			return nil, err
		}
		if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
				return &metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonPolicyApplyFailed,
					Message: fmt.Sprintf("the API server refused %s %s: %v", kindOf(obj), obj.GetName(), err)}, nil
			}
			return nil, err
		}
		// What was written, for verify to know whether it checked it.
		obj.SetResourceVersion(u.GetResourceVersion())
	}
	hash := objs[0].GetAnnotations()[sidecarpolicy.RevisionAnnotation]
	return &metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonPolicyInPlace,
		Message: fmt.Sprintf("MutatingAdmissionPolicy %s and its binding inject revision %s", objs[0].GetName(), hash)}, nil
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *admissionregistrationv1.MutatingAdmissionPolicy:
		return "MutatingAdmissionPolicy"
	default:
		return "MutatingAdmissionPolicyBinding"
	}
}

// toApply renders a typed object (with its apiVersion and kind) as the
// unstructured apply configuration server-side apply takes.
func toApply(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// deleteOwned deletes the policy and binding of s, where they exist and s
// owns them (an object of the same name someone else made is left alone).
func (r *Reconciler) deleteOwned(ctx context.Context, s *deckhandv1alpha1.SidecarSet) error {
	name := sidecarpolicy.Name(s.Name)
	for _, obj := range []client.Object{&admissionregistrationv1.MutatingAdmissionPolicyBinding{}, &admissionregistrationv1.MutatingAdmissionPolicy{}} {
		if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if !metav1.IsControlledBy(obj, s) {
			continue
		}
		// The UID precondition: never delete a newer object of that name.
		uid := obj.GetUID()
		if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return err
		}
		logf.FromContext(ctx).Info("deleted the injection policy of a SidecarSet no longer in Policy mode", "sidecarset", klog.KObj(s), "object", name)
	}
	return nil
}

// setCondition sets (or, with nil, removes) InjectionPolicyReady, with an
// Event when its status or reason changes. It is the one condition this
// controller writes on a SidecarSet, under its own field manager; the
// SidecarSet controller owns the rest of the status.
func (r *Reconciler) setCondition(ctx context.Context, s *deckhandv1alpha1.SidecarSet, c *metav1.Condition) (ctrl.Result, error) {
	w := statuspatch.Writer{Client: r.Client, FieldManager: FieldManager}
	owned := []string{deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition}
	if c == nil {
		return w.Conditions(ctx, s, owned)
	}
	conds := append([]metav1.Condition(nil), s.Status.Conditions...)
	old := meta.FindStatusCondition(conds, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition)
	c.Type = deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition
	c.ObservedGeneration = s.Generation
	meta.SetStatusCondition(&conds, *c)
	want := *meta.FindStatusCondition(conds, c.Type)
	res, err := w.Conditions(ctx, s, owned, want)
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	if old == nil || old.Status != c.Status || old.Reason != c.Reason {
		typ := corev1.EventTypeNormal
		// A policy not loaded yet is the normal first moment of
		// every policy: no Warning.
		if c.Status != metav1.ConditionTrue && c.Reason != ReasonPolicyNotYetInEffect {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(s, nil, typ, c.Reason, "InjectionPolicy", "%s", c.Message)
	}
	return res, nil
}

// PolicyAPIServed asks the API server's discovery whether it serves
// MutatingAdmissionPolicies and their bindings in admissionregistration.k8s.io/v1.
func PolicyAPIServed(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(admissionregistrationv1.SchemeGroupVersion.String())
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	found := 0
	for _, res := range list.APIResources {
		if res.Name == "mutatingadmissionpolicies" || res.Name == "mutatingadmissionpolicybindings" {
			found++
		}
	}
	return found == 2, nil
}
