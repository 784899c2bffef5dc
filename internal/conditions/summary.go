// Package conditions writes the summary conditions every Deckhand kind
// carries, Ready, Reconciling and Stalled, from a verdict each controller
// reaches from its own conditions and counts. Tools that know nothing of
// Deckhand read them: kubectl wait --for=condition=Ready, kstatus
// (sigs.k8s.io/cli-utils, behind Flux and kpt) and Deckhand's Argo CD health
// check.
package conditions

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// State is where an object stands towards its spec.
type State int

const (
	// Ready: the object has reached what its spec asks for. Ready is True.
	Ready State = iota
	// Reconciling: Deckhand is working towards the spec (scaling, rolling
	// out). Ready is False and Reconciling True.
	Reconciling
	// Waiting: the object has not reached its spec, but Deckhand has nothing
	// to do and nothing is broken yet: pods still becoming ready, a rollout
	// the user paused. Ready is False; neither Reconciling nor Stalled is set.
	Waiting
	// Stalled: progress is blocked until someone acts. Ready is False and
	// Stalled True.
	Stalled
)

// Summary is a controller's verdict on one object: its state and the
// reason and message the summary conditions carry.
type Summary struct {
	State   State
	Reason  string
	Message string
}

// Set writes the summary conditions of s into conds for generation, the
// generation the verdict was reached for. Ready is always present.
// Reconciling and Stalled follow the kstatus abnormal-true convention: they
// are present only while True and removed otherwise, so an object without
// them is not known to be in trouble; and never both at once, because
// kstatus reports whichever it finds first. A condition whose status does not
// change keeps its lastTransitionTime; now is the time of a change.
func Set(conds *[]metav1.Condition, generation int64, now time.Time, s Summary) {
	set := func(typ string, status metav1.ConditionStatus) {
		meta.SetStatusCondition(conds, metav1.Condition{
			Type: typ, Status: status, Reason: s.Reason, Message: s.Message,
			ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now),
		})
	}
	if s.State == Ready {
		set(deckhandv1alpha1.ReadyCondition, metav1.ConditionTrue)
	} else {
		set(deckhandv1alpha1.ReadyCondition, metav1.ConditionFalse)
	}
	for typ, state := range map[string]State{
		deckhandv1alpha1.ReconcilingCondition: Reconciling,
		deckhandv1alpha1.StalledCondition:     Stalled,
	} {
		if s.State == state {
			set(typ, metav1.ConditionTrue)
		} else {
			meta.RemoveStatusCondition(conds, typ)
		}
	}
}
