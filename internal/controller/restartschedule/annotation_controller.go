package restartschedule

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/names"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
)

// annotationTrue is the annotation value that asks for the manager's
// default schedule.
const annotationTrue = "true"

// Event reasons on annotated workloads.
const (
	ReasonRestartScheduleGenerated = "RestartScheduleGenerated"
	ReasonRestartScheduleConflict  = "RestartScheduleConflict"
	ReasonInvalidRestartSchedule   = "InvalidRestartSchedule"
)

// AnnotationReconciler generates a RestartSchedule, named by generatedName,
// for every Deployment, StatefulSet and DaemonSet annotated
// apps.deckhand.dev/restart-schedule, keeps it in line with the annotation
// and deletes it when the annotation goes away. Workloads that never carried
// the annotation are filtered out before they reach the work queue.
type AnnotationReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// DefaultSchedule is the schedule of an object generated from the value
	// "true" (the manager's --default-restart-schedule).
	DefaultSchedule string
	// Recorder emits Events on workloads; SetupWithManager sets it when nil.
	Recorder events.EventRecorder
}

// +kubebuilder:rbac:groups=apps.deckhand.dev,resources=restartschedules,verbs=get;list;watch;create;patch;delete,roleName=manager-restartschedule-role
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;watch;patch,roleName=manager-restartschedule-role
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers one controller per workload kind with mgr.
func (r *AnnotationReconciler) SetupWithManager(mgr ctrl.Manager) error {
	reconcileutil.Defaults(mgr, "deckhand-restartschedule", reconcileutil.Fields{Client: &r.Client, Recorder: &r.Recorder})
	for _, kind := range workloadKinds {
		obj, _ := newWorkload(kind)
		err := ctrl.NewControllerManagedBy(mgr).
			Named("restartschedule-annotation-"+strings.ToLower(kind)).
			For(obj, builder.WithPredicates(optedIn)).
			// A generated object that is deleted or edited wakes its workload.
			Owns(&deckhandv1alpha1.RestartSchedule{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				return r.reconcileWorkload(ctx, kind, req)
			}))
		if err != nil {
			return err
		}
	}
	return nil
}

// hasOptIn reports whether a workload carries the annotation, or carried it
// (the generated marker is still there).
func hasOptIn(o client.Object) bool {
	a := o.GetAnnotations()
	_, on := a[deckhandv1alpha1.RestartScheduleAnnotation]
	_, marked := a[deckhandv1alpha1.RestartScheduleGeneratedAnnotation]
	return on || marked
}

// optedIn lets through only workloads that are, or were, annotated, so that
// every other workload is never even queued.
var optedIn = predicate.Funcs{
	CreateFunc:  func(e event.CreateEvent) bool { return hasOptIn(e.Object) },
	UpdateFunc:  func(e event.UpdateEvent) bool { return hasOptIn(e.ObjectOld) || hasOptIn(e.ObjectNew) },
	DeleteFunc:  func(event.DeleteEvent) bool { return false }, // the garbage collector deletes the generated object
	GenericFunc: func(e event.GenericEvent) bool { return hasOptIn(e.Object) },
}

func (r *AnnotationReconciler) reconcileWorkload(ctx context.Context, kind string, req reconcile.Request) (reconcile.Result, error) {
	log := logf.FromContext(ctx)
	obj, err := newWorkload(kind)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, nil
	}
	ann := obj.GetAnnotations()
	value, on := ann[deckhandv1alpha1.RestartScheduleAnnotation]
	value = strings.TrimSpace(value)
	marker, marked := ann[deckhandv1alpha1.RestartScheduleGeneratedAnnotation]

	rs := &deckhandv1alpha1.RestartSchedule{}
	err = r.Client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: generatedName(obj.GetName(), kind)}, rs)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	exists := err == nil
	owned := exists && metav1.IsControlledBy(rs, obj)
	legacy, err := r.legacyGenerated(ctx, obj)
	if err != nil {
		return reconcile.Result{}, err
	}

	if !on {
		if owned && rs.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, rs, client.Preconditions{UID: &rs.UID}); client.IgnoreNotFound(err) != nil {
				return reconcile.Result{}, err
			}
			log.Info("deleted the generated RestartSchedule: annotation removed", "restartschedule", klog.KObj(rs))
		}
		if err := r.deleteLegacy(ctx, legacy); err != nil {
			return reconcile.Result{}, err
		}
		if marked {
			return reconcile.Result{}, r.setMarker(ctx, obj, nil)
		}
		return reconcile.Result{}, nil
	}

	if exists && !owned {
		// The object generated under the old name, if any, keeps running:
		// it is the only schedule this workload has.
		r.Recorder.Eventf(obj, rs, corev1.EventTypeWarning, ReasonRestartScheduleConflict, "Generate",
			"RestartSchedule %q exists and was not generated for this %s; it is left alone", rs.Name, kind)
		return reconcile.Result{}, nil
	}

	if !exists {
		if legacy == nil && marked && marker == value {
			// Generated before and deleted since, with the annotation
			// unchanged: a user removed it on purpose. Changing (or removing
			// and re-adding) the annotation generates it again.
			log.V(1).Info("generated RestartSchedule was deleted; not re-creating it until the annotation changes")
			return reconcile.Result{}, nil
		}
		rs = r.generate(obj, kind, value, legacy)
		if err := r.Client.Create(ctx, rs, client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
			if r.refused(obj, nil, "generate", rs.Name, err) {
				return reconcile.Result{}, nil
			}
			return reconcile.Result{}, err
		}
		log.Info("generated a RestartSchedule", "restartschedule", klog.KObj(rs), "schedule", rs.Spec.Schedule)
		if legacy != nil {
			r.Recorder.Eventf(obj, rs, corev1.EventTypeNormal, ReasonRestartScheduleGenerated, "Generate",
				"generated RestartSchedule %q with schedule %q to replace %q, generated under the %s's name by an earlier version", rs.Name, rs.Spec.Schedule, legacy.Name, kind)
		} else {
			r.Recorder.Eventf(obj, rs, corev1.EventTypeNormal, ReasonRestartScheduleGenerated, "Generate",
				"generated RestartSchedule %q with schedule %q", rs.Name, rs.Spec.Schedule)
		}
		// The old object goes only once its replacement exists: a crash in
		// between leaves both, which restart the same slot with the same
		// value (one rollout), and the next reconcile deletes the old one.
		if err := r.deleteLegacy(ctx, legacy); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, r.setMarker(ctx, obj, &value)
	}
	if err := r.deleteLegacy(ctx, legacy); err != nil {
		return reconcile.Result{}, err
	}

	// Owned: the annotation sets spec.schedule (unless "true") and, when
	// present, spec.timeZone. Every other field belongs to the user.
	before := rs.DeepCopy()
	if value != annotationTrue {
		rs.Spec.Schedule = value
	}
	if tz, ok := ann[deckhandv1alpha1.RestartTimeZoneAnnotation]; ok {
		rs.Spec.TimeZone = strings.TrimSpace(tz)
	}
	copyRunNow(obj, rs)
	if rs.Spec.Schedule != before.Spec.Schedule || rs.Spec.TimeZone != before.Spec.TimeZone ||
		runNowToken(rs.Annotations) != runNowToken(before.Annotations) {
		if err := r.Client.Patch(ctx, rs, client.MergeFrom(before), client.FieldOwner(deckhandv1alpha1.FieldManager)); err != nil {
			if r.refused(obj, rs, "update", rs.Name, err) {
				return reconcile.Result{}, nil
			}
			return reconcile.Result{}, err
		}
		log.Info("updated the generated RestartSchedule from the annotation", "restartschedule", klog.KObj(rs), "schedule", rs.Spec.Schedule)
	}
	if !marked || marker != value {
		return reconcile.Result{}, r.setMarker(ctx, obj, &value)
	}
	return reconcile.Result{}, nil
}

// generatedName is the name of the RestartSchedule generated for a
// workload: "<name>-<kind in lower case>", so that a Deployment and a
// StatefulSet of the same name each get their own. A result longer than a
// name may be (253 characters) is cut to 244 characters, without trailing
// dots or dashes, and followed by "-" and the first 8 hex digits of the
// SHA-256 of the full result: still unique per workload, and the same on
// every reconcile and every replica.
func generatedName(name, kind string) string {
	full := name + "-" + strings.ToLower(kind)
	return names.Rule{Max: validation.DNS1123SubdomainMaxLength, Digits: 8, Trim: ".-"}.Shorten(full, full)
}

// legacyGenerated returns the RestartSchedule that an earlier version of
// Deckhand generated for obj under obj's bare name, or nil. Only an object
// labelled as generated and controlled by obj qualifies: a user's object of
// that name, or one generated for a workload of another kind, is not ours to
// replace.
// refused tells whether the API server refused the RestartSchedule that the
// annotation of obj asks for (an invalid annotation) and, if so, says so in
// a warning on the workload: retrying cannot help, the next change of the
// annotation tries again. Any other error is left to the caller to retry.
func (r *AnnotationReconciler) refused(obj, related runtime.Object, action, name string, err error) bool {
	if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) && !apierrors.IsForbidden(err) {
		return false
	}
	r.Recorder.Eventf(obj, related, corev1.EventTypeWarning, ReasonInvalidRestartSchedule, "Generate",
		"cannot %s RestartSchedule %q from the %s annotation: %v", action, name, deckhandv1alpha1.RestartScheduleAnnotation, err)
	return true
}

func (r *AnnotationReconciler) legacyGenerated(ctx context.Context, obj client.Object) (*deckhandv1alpha1.RestartSchedule, error) {
	rs := &deckhandv1alpha1.RestartSchedule{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), rs); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if rs.Labels[deckhandv1alpha1.RestartScheduleGeneratedLabel] != "true" || !metav1.IsControlledBy(rs, obj) || !rs.DeletionTimestamp.IsZero() {
		return nil, nil
	}
	return rs, nil
}

// deleteLegacy deletes the object legacyGenerated found, if any.
func (r *AnnotationReconciler) deleteLegacy(ctx context.Context, legacy *deckhandv1alpha1.RestartSchedule) error {
	if legacy == nil {
		return nil
	}
	if err := r.Client.Delete(ctx, legacy, client.Preconditions{UID: &legacy.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting RestartSchedule %s generated under the old name: %w", klog.KObj(legacy), err)
	}
	logf.FromContext(ctx).Info("deleted the RestartSchedule generated under the workload's bare name by an earlier version", "restartschedule", klog.KObj(legacy))
	return nil
}

// generate builds the RestartSchedule for an annotated workload. Replacing
// legacy (the object generated under the old name), it starts from legacy's
// spec, so that the user's edits (suspend, historyLimit, a schedule of
// their own for the value "true", ...) carry over.
func (r *AnnotationReconciler) generate(obj client.Object, kind, value string, legacy *deckhandv1alpha1.RestartSchedule) *deckhandv1alpha1.RestartSchedule {
	spec := deckhandv1alpha1.RestartScheduleSpec{Schedule: r.DefaultSchedule}
	if legacy != nil {
		spec = *legacy.Spec.DeepCopy()
	}
	if value != annotationTrue {
		spec.Schedule = value
	}
	if tz, ok := obj.GetAnnotations()[deckhandv1alpha1.RestartTimeZoneAnnotation]; ok {
		spec.TimeZone = strings.TrimSpace(tz)
	}
	spec.Target = deckhandv1alpha1.RestartTarget{
		TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: kind, Name: obj.GetName()},
	}
	rs := &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{
			Name:      generatedName(obj.GetName(), kind),
			Namespace: obj.GetNamespace(),
			Labels: map[string]string{
				deckhandv1alpha1.ManagedByLabel:                deckhandv1alpha1.ManagedByValue,
				deckhandv1alpha1.RestartScheduleGeneratedLabel: "true",
			},
			// Controller owner reference: the garbage collector deletes the
			// generated object with its workload. blockOwnerDeletion stays
			// off, which would need update rights on the workload's
			// finalizers for nothing.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: appsv1.SchemeGroupVersion.String(),
				Kind:       kind,
				Name:       obj.GetName(),
				UID:        obj.GetUID(),
				Controller: ptr.To(true),
			}},
		},
		Spec: spec,
	}
	copyRunNow(obj, rs)
	return rs
}

// copyRunNow copies the workload's run-now token, if any, to its generated
// RestartSchedule, where the RestartSchedule controller runs it, together
// with the ignore-windows override when that names the same token (in the
// same write, so the controller sees the token and its override at once).
// Removing them from the workload leaves the schedule's copies alone: a
// token that ran stays recorded as handled either way.
func copyRunNow(obj client.Object, rs *deckhandv1alpha1.RestartSchedule) {
	ann := obj.GetAnnotations()
	token := runNowToken(ann)
	if token == "" || token == runNowToken(rs.Annotations) {
		return
	}
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	rs.Annotations[deckhandv1alpha1.RestartScheduleRunNowAnnotation] = token
	if ann[deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation] == token {
		rs.Annotations[deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation] = token
	}
}

// setMarker sets (value non-nil) or removes the generated marker annotation
// on the workload's metadata; the pod template is not touched.
func (r *AnnotationReconciler) setMarker(ctx context.Context, obj client.Object, value *string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		deckhandv1alpha1.RestartScheduleGeneratedAnnotation: value,
	}}})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, body), client.FieldOwner(deckhandv1alpha1.FieldManager)); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("marking %s %s: %w", kindOf(obj), klog.KObj(obj), err)
	}
	return nil
}
