package sidecarset

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/rolloutpreview"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// PreviewInput is what a rollout preview is computed from: a SidecarSet as
// it would be after a change, and the pods as they are.
type PreviewInput struct {
	// Set is the SidecarSet with the changed spec.
	Set *deckhandv1alpha1.SidecarSet
	// Lister compiles Set and knows the namespaces' labels and the
	// protected namespaces.
	Lister *sidecarcontrol.Lister
	// Pods are the pods of the namespaces Set may reach; the preview selects
	// among them as the controller does.
	Pods []*corev1.Pod
	// Revisions are the running hashes of Set's existing revisions, by
	// revision hash (sidecarcontrol.RunningRevisionOf); nil when they
	// cannot be read, and then a pod behind only in run-once init
	// containers reads as behind in its spec, as it does for the controller
	// when a revision is missing.
	Revisions map[string]sidecarcontrol.RunningRevision
	// Now is the time resize deadlines are measured against.
	Now time.Time
	// DisruptionBudgets are the PodDisruptionBudgets of the pods'
	// namespaces, by namespace: a ready pod is updated only while those
	// covering it allow a disruption, each pass starting from what their
	// status allows now.
	DisruptionBudgets map[string][]policyv1.PodDisruptionBudget
}

// RolloutPreview is what the controller would do, pass after pass, to bring
// the pods a SidecarSet selects to its latest revision.
type RolloutPreview struct {
	// Revision is the latest revision's hash.
	Revision string `json:"revision"`
	// MaxUnavailable and Partition are the strategy's, resolved against the
	// pods the rollout covers.
	MaxUnavailable int `json:"maxUnavailable"`
	Partition      int `json:"partition"`
	// Steps is how many passes the rollout takes, each waiting for the pods
	// of the one before to be ready again.
	Steps int `json:"steps"`
	// Held says why no pass runs now (updateStrategy.paused or type
	// NotUpdate); the passes are what runs once that changes.
	Held string `json:"held,omitempty"`
	// Pods are in the order the rollout acts on them, then the pods it
	// leaves alone in namespace and name order.
	Pods []rolloutpreview.Pod `json:"pods"`
}

// Preview computes the rollout of in.Set with the controller's own
// classification (classify) and planner (planRollout), writing nothing. It
// runs planRollout once per pass, taking the pods of a pass to run the
// latest revision, with the readiness they had, before the next pass, as
// the controller waits for them; a pod not ready for reasons of its own
// stays so and keeps its share of maxUnavailable.
func Preview(in PreviewInput) RolloutPreview {
	s := in.Set
	c := in.Lister.Compiled(s)
	out := RolloutPreview{Revision: c.Hash}
	var selected []*corev1.Pod
	if !c.Selector.Empty() {
		for _, p := range in.Pods {
			if c.Selector.Matches(labels.Set(p.Labels)) {
				selected = append(selected, p)
			}
		}
	}
	active, _ := reachable(in.Lister, s, c, selected)
	states := make([]podState, len(active))
	cin := classifyInput{set: s, compiled: c, now: in.Now, deferredTimeout: DefaultResizeDeferredTimeout, running: in.Revisions}
	sc := &scope{set: s, compiled: c, now: in.Now, pods: make([]*podState, len(active))}
	for i, p := range active {
		classify(cin, p, &states[i])
		sc.pods[i] = &states[i]
		if states[i].injected() {
			sc.status.MatchedPods++
		}
	}
	rin := sc.rolloutInput()
	out.MaxUnavailable, out.Partition = rin.maxUnavailable, rin.partition
	us := s.Spec.UpdateStrategy
	switch {
	case us.Type == deckhandv1alpha1.NotUpdateSidecarSetStrategy:
		out.Held = "updateStrategy.type is NotUpdate: running pods are never updated"
		rin.pods = nil
	case us.Paused:
		out.Held = "updateStrategy.paused is true"
	}
	budgets := func() *disruptionBudgets {
		b, _ := newDisruptionBudgets(sc.pods, func(ns string) ([]policyv1.PodDisruptionBudget, error) { return in.DisruptionBudgets[ns], nil })
		return b
	}
	acted := map[*podState]bool{}
	for step := 1; step <= len(active)+1; step++ {
		rin.budgets = budgets()
		plan := planRollout(rin)
		var moved []rolloutpreview.Pod
		for _, p := range plan.inPlace {
			action := rolloutpreview.UpdateInPlace
			if p.stage == stageResourcesBehind {
				action = rolloutpreview.ResizeInPlace
			}
			moved = append(moved, previewOf(p, action, step))
		}
		for _, p := range plan.resize {
			moved = append(moved, previewOf(p, rolloutpreview.ResizeInPlace, step))
		}
		for _, p := range plan.evict {
			moved = append(moved, previewOf(p, rolloutpreview.Recreate, step))
		}
		if len(moved) == 0 {
			break
		}
		out.Steps = step
		out.Pods = append(out.Pods, moved...)
		// The next pass starts once this one's pods run the latest revision,
		// and any update that was under way has finished; a pod keeps its
		// readiness (one not ready for reasons of its own stays so).
		for _, p := range append(append(plan.inPlace, plan.resize...), plan.evict...) {
			acted[p] = true
			p.stage, p.resize = stageUpdated, resizeNone
		}
		for _, p := range rin.pods {
			if p.stage == stageRollingOut {
				p.stage = stageUpdated
			}
		}
	}
	rin.budgets = nil
	kept := keptByPartition(rin)
	fresh := budgets()
	for _, p := range sortedStates(sc.pods) {
		if !acted[p] {
			why := whyLeftAlone(p, rin.evict, kept[p])
			if blockedBy, ok := fresh.take(p.pod); !ok && p.ready && !kept[p] && why == whyWaiting {
				why = fmt.Sprintf("PodDisruptionBudget %s allows no disruption now", blockedBy)
			}
			out.Pods = append(out.Pods, rolloutpreview.Pod{Namespace: p.pod.Namespace, Name: p.pod.Name, Action: rolloutpreview.None, Why: why})
		}
	}
	return out
}

func previewOf(p *podState, action rolloutpreview.PodAction, step int) rolloutpreview.Pod {
	return rolloutpreview.Pod{Namespace: p.pod.Namespace, Name: p.pod.Name, Action: action, Step: step}
}

// keptByPartition returns the pods the rollout would still move but
// updateStrategy.partition keeps at their revision: those planRollout moves
// with no maxUnavailable limit and no partition, less those it moves with
// the partition (the last in the rollout's order).
func keptByPartition(in rolloutInput) map[*podState]bool {
	unlimited := in
	unlimited.maxUnavailable = math.MaxInt
	withPartition := planRollout(unlimited)
	unlimited.partition = 0
	all := planRollout(unlimited)
	moved := map[*podState]bool{}
	for _, p := range append(withPartition.inPlace, withPartition.evict...) {
		moved[p] = true
	}
	kept := map[*podState]bool{}
	for _, p := range append(all.inPlace, all.evict...) {
		if !moved[p] {
			kept[p] = true
		}
	}
	return kept
}

// whyLeftAlone says why a rollout does not act on p.
func whyLeftAlone(p *podState, evict, partition bool) string {
	switch p.stage {
	case stageNameClash:
		return fmt.Sprintf("not injected: its container %q has a sidecar's name", p.clash)
	case stageOptedOut:
		return "not injected: opted out (annotation, or injectionStrategy.paused)"
	case stageUpdated, stageRollingOut:
		return "at the latest revision"
	}
	switch {
	case !p.inScope:
		return "outside updateStrategy.selector"
	case p.needsRecreate() && !evict:
		if p.stage == stageNotInjected {
			return "not injected: only a new pod gets the sidecars (updateStrategy.recreate is not Evict)"
		}
		return "only recreating it updates it, and updateStrategy.recreate is not Evict"
	case p.needsRecreate() && !p.controlled:
		return "needs recreating, but has no controller that would recreate it"
	case partition:
		return "kept at its revision by updateStrategy.partition"
	}
	return whyWaiting
}

// whyWaiting is why a pod the rollout would move waits for the budget.
const whyWaiting = "waiting: maxUnavailable is used up by updated pods that are not ready"

// sortedStates returns states by namespace and name.
func sortedStates(states []*podState) []*podState {
	out := slices.Clone(states)
	slices.SortFunc(out, func(a, b *podState) int { return strings.Compare(podKey(a.pod), podKey(b.pod)) })
	return out
}
