package sidecarset

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/conditions"
	sidecarpolicyctrl "github.com/deckhand-dev/deckhand/internal/controller/sidecarpolicy"
)

// TestSummarizeInjectionPolicy: in Policy mode, a policy the API server
// does not hold for the current spec stalls the SidecarSet; a mode the
// API server does not serve (the webhook injects instead) does not.
func TestSummarizeInjectionPolicy(t *testing.T) {
	healthy := []metav1.Condition{
		{Type: deckhandv1alpha1.SidecarSetPodsInjectedCondition, Status: metav1.ConditionTrue, Reason: ReasonAllPodsInjected},
		{Type: deckhandv1alpha1.SidecarSetPodsUpdatedCondition, Status: metav1.ConditionTrue, Reason: ReasonAllPodsUpdated},
	}
	policy := func(status metav1.ConditionStatus, reason string) []metav1.Condition {
		return append(append([]metav1.Condition(nil), healthy...), metav1.Condition{
			Type: deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition, Status: status, Reason: reason, Message: "m"})
	}
	for name, tc := range map[string]struct {
		conds  []metav1.Condition
		state  conditions.State
		reason string
	}{
		"webhook mode":         {conds: healthy, state: conditions.Ready, reason: ReasonAllPodsUpdated},
		"policy in place":      {conds: policy(metav1.ConditionTrue, sidecarpolicyctrl.ReasonPolicyInPlace), state: conditions.Ready, reason: ReasonAllPodsUpdated},
		"API not served":       {conds: policy(metav1.ConditionFalse, sidecarpolicyctrl.ReasonPolicyAPIUnavailable), state: conditions.Ready, reason: ReasonAllPodsUpdated},
		"policy name taken":    {conds: policy(metav1.ConditionFalse, sidecarpolicyctrl.ReasonPolicyNameTaken), state: conditions.Stalled, reason: sidecarpolicyctrl.ReasonPolicyNameTaken},
		"policy apply refused": {conds: policy(metav1.ConditionFalse, sidecarpolicyctrl.ReasonPolicyApplyFailed), state: conditions.Stalled, reason: sidecarpolicyctrl.ReasonPolicyApplyFailed},
		"policy not loaded":    {conds: policy(metav1.ConditionFalse, sidecarpolicyctrl.ReasonPolicyNotYetInEffect), state: conditions.Reconciling, reason: sidecarpolicyctrl.ReasonPolicyNotYetInEffect},
	} {
		t.Run(name, func(t *testing.T) {
			st := &deckhandv1alpha1.SidecarSetStatus{Conditions: tc.conds, MatchedPods: 2, ReadyPods: 2}
			got := summarize(st, 0, false)
			if got.State != tc.state || got.Reason != tc.reason {
				t.Errorf("summarize = %v/%s, want %v/%s", got.State, got.Reason, tc.state, tc.reason)
			}
		})
	}
}

// TestAwaitPolicy: in Policy mode, Ready waits for an InjectionPolicyReady
// condition that speaks of the current generation.
func TestAwaitPolicy(t *testing.T) {
	ready := conditions.Summary{State: conditions.Ready, Reason: ReasonAllPodsUpdated}
	stalled := conditions.Summary{State: conditions.Stalled, Reason: ReasonPodsNotInjected}
	at := func(gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition, Status: metav1.ConditionTrue,
			Reason: sidecarpolicyctrl.ReasonPolicyInPlace, ObservedGeneration: gen}}
	}
	for name, tc := range map[string]struct {
		conds  []metav1.Condition
		sum    conditions.Summary
		state  conditions.State
		reason string
	}{
		"no condition yet":   {sum: ready, state: conditions.Reconciling, reason: ReasonPolicyPending},
		"older generation":   {conds: at(1), sum: ready, state: conditions.Reconciling, reason: ReasonPolicyPending},
		"current generation": {conds: at(2), sum: ready, state: conditions.Ready, reason: ReasonAllPodsUpdated},
		"not ready anyway":   {sum: stalled, state: conditions.Stalled, reason: ReasonPodsNotInjected},
	} {
		t.Run(name, func(t *testing.T) {
			got := awaitPolicy(&deckhandv1alpha1.SidecarSetStatus{Conditions: tc.conds}, 2, tc.sum)
			if got.State != tc.state || got.Reason != tc.reason {
				t.Errorf("awaitPolicy = %v/%s, want %v/%s", got.State, got.Reason, tc.state, tc.reason)
			}
		})
	}
}
