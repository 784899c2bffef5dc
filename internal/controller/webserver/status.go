package webserver

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/conditions"
	"github.com/deckhand-dev/deckhand/internal/rollout"
)

// Condition reasons, stable for users' automation.
const (
	ReasonNameConflict             = "NameConflict"
	ReasonApplyFailed              = "ApplyFailed"
	ReasonDeploymentPending        = "DeploymentPending"
	ReasonServicePending           = "ServicePending"
	ReasonRollingOut               = "RollingOut"
	ReasonRolloutComplete          = "RolloutComplete"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	ReasonReplicaFailure           = "ReplicaFailure"
	ReasonAsExpected               = "AsExpected"
)

// summarize reaches the verdict of the summary conditions from Available,
// Progressing and Degraded: a WebServer is Ready when its Deployment is
// rolled out to the current spec and available and its Service exists;
// Degraded (a name conflict, a failed apply, a stuck rollout, failing
// replicas) stalls it; a rollout in progress is Reconciling. Each verdict
// carries the reason and message of the condition it comes from.
func summarize(st *deckhandv1alpha1.WebServerStatus) conditions.Summary {
	available := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.WebServerAvailableCondition)
	progressing := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.WebServerProgressingCondition)
	degraded := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.WebServerDegradedCondition)
	switch {
	case degraded.Status == metav1.ConditionTrue:
		return conditions.Summary{State: conditions.Stalled, Reason: degraded.Reason, Message: degraded.Message}
	case progressing.Status == metav1.ConditionTrue:
		return conditions.Summary{State: conditions.Reconciling, Reason: progressing.Reason, Message: progressing.Message}
	case available.Status != metav1.ConditionTrue:
		return conditions.Summary{State: conditions.Waiting, Reason: available.Reason, Message: available.Message}
	}
	return conditions.Summary{State: conditions.Ready, Reason: progressing.Reason, Message: progressing.Message + "; serving " + st.URL}
}

// observed is what one reconcile found and did; computeStatus turns it into
// the WebServer's status.
type observed struct {
	deployment *appsv1.Deployment    // nil when missing or in conflict
	service    *corev1.Service       // nil when missing or in conflict
	ingress    *networkingv1.Ingress // nil when missing, in conflict or not asked for
	route      *gatewayv1.HTTPRoute  // nil when missing, in conflict or not asked for
	// routeScheme is the scheme of the route's URL once its Gateway has
	// accepted it, "" until then.
	routeScheme string
	// conflicts describes the objects of our name that this WebServer does
	// not control, e.g. "Deployment web/site exists and is not controlled by
	// this WebServer".
	conflicts []string
	// applyErrs are the failures of this reconcile's applies.
	applyErrs []string
	// now is when the reconcile started: a condition whose status changes
	// says so at this time (the zero time, as unit tests leave it, stands
	// for the real time).
	now time.Time
}

// computeStatus derives the status from the Deployment and Service. It keeps
// the last transition times of conditions whose status did not change.
func computeStatus(ws *deckhandv1alpha1.WebServer, o observed) deckhandv1alpha1.WebServerStatus {
	st := *ws.Status.DeepCopy()
	if len(o.applyErrs) == 0 {
		// Only a reconcile that applied (or deliberately left alone) every
		// child has acted on this generation; the conditions say why not.
		st.ObservedGeneration = ws.Generation
	}
	st.Selector = labels.SelectorFromSet(selectorLabels(ws.Name)).String()
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas = 0, 0, 0
	st.URL = ""
	if d := o.deployment; d != nil {
		st.Replicas = d.Status.Replicas
		st.ReadyReplicas = d.Status.ReadyReplicas
		st.AvailableReplicas = d.Status.AvailableReplicas
	}
	if o.service != nil {
		st.URL = URL(ws)
	}
	if in := ws.Spec.Ingress; in != nil && in.Gateway == nil && o.ingress != nil {
		st.URL = ExternalURL(ws)
	}
	if in := ws.Spec.Ingress; in != nil && in.Gateway != nil && o.routeScheme != "" {
		st.URL = externalURL(ws, o.routeScheme)
	}

	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: ws.Generation,
			LastTransitionTime: metav1.NewTime(o.now),
		})
	}
	conflictMsg := ""
	if len(o.conflicts) > 0 {
		conflictMsg = strings.Join(o.conflicts, "; ") +
			"; Deckhand leaves it untouched: delete or rename it, or give the WebServer another name"
	}

	// Available
	switch d := o.deployment; {
	case conflictMsg != "" && d == nil:
		set(deckhandv1alpha1.WebServerAvailableCondition, metav1.ConditionFalse, ReasonNameConflict, conflictMsg)
	case d == nil:
		set(deckhandv1alpha1.WebServerAvailableCondition, metav1.ConditionFalse, ReasonDeploymentPending, "the Deployment does not exist yet")
	default:
		c := deploymentCondition(d, appsv1.DeploymentAvailable)
		switch {
		case c == nil:
			set(deckhandv1alpha1.WebServerAvailableCondition, metav1.ConditionFalse, ReasonDeploymentPending, "the Deployment reports no availability yet")
		case c.Status == corev1.ConditionTrue && o.service == nil:
			reason, msg := ReasonServicePending, "the Service does not exist yet"
			if conflictMsg != "" {
				reason, msg = ReasonNameConflict, conflictMsg
			}
			set(deckhandv1alpha1.WebServerAvailableCondition, metav1.ConditionFalse, reason, msg)
		default:
			set(deckhandv1alpha1.WebServerAvailableCondition, metav1.ConditionStatus(c.Status), c.Reason,
				fmt.Sprintf("%d/%d replicas available: %s", d.Status.AvailableReplicas, desiredReplicas(d), c.Message))
		}
	}

	// Progressing
	switch d := o.deployment; {
	case d == nil && conflictMsg != "":
		set(deckhandv1alpha1.WebServerProgressingCondition, metav1.ConditionFalse, ReasonNameConflict, conflictMsg)
	case d == nil:
		set(deckhandv1alpha1.WebServerProgressingCondition, metav1.ConditionTrue, ReasonDeploymentPending, "creating the Deployment")
	case deadlineExceeded(d) != nil:
		set(deckhandv1alpha1.WebServerProgressingCondition, metav1.ConditionFalse, ReasonProgressDeadlineExceeded, deadlineExceeded(d).Message)
	case rollout.IsComplete(d):
		set(deckhandv1alpha1.WebServerProgressingCondition, metav1.ConditionFalse, ReasonRolloutComplete,
			fmt.Sprintf("%d/%d replicas updated and available", d.Status.AvailableReplicas, desiredReplicas(d)))
	default:
		set(deckhandv1alpha1.WebServerProgressingCondition, metav1.ConditionTrue, ReasonRollingOut,
			fmt.Sprintf("%d/%d replicas updated, %d available", d.Status.UpdatedReplicas, desiredReplicas(d), d.Status.AvailableReplicas))
	}

	// Degraded: the first problem found, in order of how much the user must act.
	var rf *appsv1.DeploymentCondition
	if o.deployment != nil {
		if c := deploymentCondition(o.deployment, appsv1.DeploymentReplicaFailure); c != nil && c.Status == corev1.ConditionTrue {
			rf = c
		}
	}
	switch {
	case conflictMsg != "":
		set(deckhandv1alpha1.WebServerDegradedCondition, metav1.ConditionTrue, ReasonNameConflict, conflictMsg)
	case len(o.applyErrs) > 0:
		set(deckhandv1alpha1.WebServerDegradedCondition, metav1.ConditionTrue, ReasonApplyFailed, strings.Join(o.applyErrs, "; "))
	case o.deployment != nil && deadlineExceeded(o.deployment) != nil:
		set(deckhandv1alpha1.WebServerDegradedCondition, metav1.ConditionTrue, ReasonProgressDeadlineExceeded, deadlineExceeded(o.deployment).Message)
	case rf != nil:
		set(deckhandv1alpha1.WebServerDegradedCondition, metav1.ConditionTrue, ReasonReplicaFailure, rf.Message)
	default:
		set(deckhandv1alpha1.WebServerDegradedCondition, metav1.ConditionFalse, ReasonAsExpected, "")
	}
	conditions.Set(&st.Conditions, ws.Generation, o.now, summarize(&st))
	return st
}

func deploymentCondition(d *appsv1.Deployment, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == t {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

// deploymentTimedOutReason is the reason of the Progressing condition of a
// Deployment past its progressDeadlineSeconds (the Deployment controller's
// TimedOutReason).
const deploymentTimedOutReason = "ProgressDeadlineExceeded"

func deadlineExceeded(d *appsv1.Deployment) *appsv1.DeploymentCondition {
	c := deploymentCondition(d, appsv1.DeploymentProgressing)
	if c != nil && c.Status == corev1.ConditionFalse && c.Reason == deploymentTimedOutReason {
		return c
	}
	return nil
}

func desiredReplicas(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}
