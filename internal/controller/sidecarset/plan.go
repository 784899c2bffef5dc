package sidecarset

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/updateorder"
)

// rolloutInput is what planRollout decides from.
type rolloutInput struct {
	pods []*podState
	// gone is the number of pods that are unavailable without being in
	// pods: terminating, or evicted and not yet replaced by their
	// controller (counted under recreate: Evict only).
	gone int
	// maxUnavailable and partition are the strategy's, resolved.
	maxUnavailable, partition int
	// evict: updateStrategy.recreate is Evict.
	evict bool
	// order is the compiled priority and scatter strategy; nil keeps the
	// default order.
	order *updateorder.Order
	// byWorkload: maxUnavailableScope Workload; maxUnavailableValue is then
	// resolved against each owning workload's pods.
	byWorkload          bool
	maxUnavailableValue *intstr.IntOrString
	// budgets are the PodDisruptionBudgets a ready pod's update must fit in;
	// nil allows every update.
	budgets *disruptionBudgets
}

// rolloutPlan is what the controller does to pods in one pass.
type rolloutPlan struct {
	// inPlace are updated in place: images patched, resources resized.
	inPlace []*podState
	// evict are evicted so that their controllers recreate them.
	evict []*podState
	// resize are at the latest revision with a resize request still to make
	// (a pass that stopped between the pod patch and the resize).
	resize []*podState
	// unmanaged need recreating but have no controller owner: reported,
	// never evicted.
	unmanaged []*podState
	// hotUpgrade are at the latest revision with a hot upgrade step to
	// take; the pods are already counted unavailable until it is done, so
	// it needs no budget.
	hotUpgrade []*podState
	// disruptionBlocked are ready pods the pass would have updated but a
	// PodDisruptionBudget covering them allows no disruption now.
	disruptionBlocked []*podState
}

// rolloutInput resolves the strategy against the pods the scope observed.
func (sc *scope) rolloutInput() rolloutInput {
	us := sc.set.Spec.UpdateStrategy
	evict := us.Recreate == deckhandv1alpha1.RecreateEvict
	total := int(sc.status.MatchedPods)
	if evict {
		total = sc.rolloutPopulation()
	}
	maxUnavailable := scaled(us.MaxUnavailable, total, 1)
	if maxUnavailable < 1 {
		maxUnavailable = 1
	}
	return rolloutInput{
		pods: sc.pods, gone: sc.observed.gone, evict: evict,
		maxUnavailable: maxUnavailable, partition: scaled(us.Partition, total, 0),
		order:      sc.updateOrder(),
		byWorkload: us.MaxUnavailableScope == deckhandv1alpha1.MaxUnavailableScopeWorkload, maxUnavailableValue: us.MaxUnavailable,
	}
}

// rolloutPopulation is the number of pods a rollout under Evict covers:
// the injected ones and those that missed injection for a reason a new pod
// would not hit again (needsRecreate).
func (sc *scope) rolloutPopulation() int {
	n := 0
	for _, p := range sc.pods {
		if p.injected() || p.needsRecreate() {
			n++
		}
	}
	return n
}

// planUpdates chooses the injected pods to update in place now, in order:
// planRollout without evictions.
func planUpdates(pods []*podState, maxUnavailable, partition int) []*podState {
	return planRollout(rolloutInput{pods: pods, maxUnavailable: maxUnavailable, partition: partition}).inPlace
}

// planRollout chooses what to do to which pods now. At most maxUnavailable
// pods may be unavailable to the rollout (unavailableToRollout: mid-update,
// not ready with one of the sidecars not ready, or, under Evict,
// terminating or evicted and not yet replaced) at once, counting the ones
// that already are, across the SidecarSet or, byWorkload, within each
// owning workload (a pod evicted and not yet replaced counts against every
// workload's). Updating or evicting a pod that is already not ready does
// not make things worse, so not-ready pods go first (within a priority,
// see sortCandidates) and do not use the budget. A ready pod is updated
// only while the PodDisruptionBudgets covering it allow a disruption;
// otherwise it waits (disruptionBlocked). partition pods, the last in that
// order, are kept on their old revision. Under Evict the pods that missed
// injection belong to the rollout too (they are behind the latest
// revision); pods outside updateStrategy.selector are never touched.
func planRollout(in rolloutInput) rolloutPlan {
	var out rolloutPlan
	total, atLatest := 0, 0
	gone := 0
	if in.evict {
		gone = in.gone
	}
	group := func(p *podState) types.UID {
		if in.byWorkload {
			return workloadOf(p.pod)
		}
		return ""
	}
	unavailable, sizes := map[types.UID]int{}, map[types.UID]int{}
	var candidates []*podState
	for _, p := range in.pods {
		if !p.injected() && (!in.evict || p.stage != stageNotInjected) {
			continue
		}
		total++
		sizes[group(p)]++
		if p.atLatest() || p.pending {
			atLatest++
		}
		if p.unavailableToRollout() {
			unavailable[group(p)]++
		}
		if p.pending || !p.inScope {
			continue
		}
		// Pods at the latest revision are already counted there, and
		// unavailable while a resize or hot upgrade lasts: finishing it
		// needs no budget.
		switch p.stage {
		case stageResizeFailed:
			if in.evict {
				out.recreate(p)
			}
		case stageRollingOut:
			if p.resize == resizeDue {
				out.resize = append(out.resize, p)
			}
		case stageImagesBehind, stageResourcesBehind:
			candidates = append(candidates, p)
		case stageNotInjected, stageSpecBehind:
			if in.evict && !p.controlled {
				out.unmanaged = append(out.unmanaged, p)
			} else if in.evict {
				candidates = append(candidates, p)
			}
		}
		if p.hotStepDue {
			out.hotUpgrade = append(out.hotUpgrade, p)
		}
	}
	allowed := total - in.partition - atLatest
	if allowed <= 0 || len(candidates) == 0 {
		return out
	}
	limit := func(g types.UID) int {
		if !in.byWorkload {
			return in.maxUnavailable
		}
		return max(1, scaled(in.maxUnavailableValue, sizes[g], 1))
	}
	sortCandidates(candidates, in.order)
	for _, p := range candidates {
		if allowed == 0 {
			break
		}
		if p.ready {
			g := group(p)
			if unavailable[g]+gone >= limit(g) {
				if in.byWorkload {
					continue // another workload's pods may still have room
				}
				break
			}
			if _, ok := in.budgets.take(p.pod); !ok {
				out.disruptionBlocked = append(out.disruptionBlocked, p)
				continue
			}
			unavailable[g]++
		}
		if p.needsRecreate() {
			out.evict = append(out.evict, p)
		} else {
			out.inPlace = append(out.inPlace, p)
		}
		allowed--
	}
	return out
}

// recreate puts p among the pods evicted for their controllers to recreate
// them, or, without a controller, among those reported.
func (out *rolloutPlan) recreate(p *podState) {
	if p.controlled {
		out.evict = append(out.evict, p)
	} else {
		out.unmanaged = append(out.unmanaged, p)
	}
}

// defaultOrder sorts candidates not ready first, then by namespace and name.
func defaultOrder(candidates []*podState) {
	sort.SliceStable(candidates, func(i, j int) bool {
		if candidates[i].ready != candidates[j].ready {
			return !candidates[i].ready
		}
		a, b := candidates[i].pod, candidates[j].pod
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

// scaled resolves an int-or-percent against total, rounding percentages up.
func scaled(v *intstr.IntOrString, total, def int) int {
	if v == nil {
		return def
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, total, true)
	if err != nil {
		return def
	}
	return n
}

// updateOrder compiles the SidecarSet's priority and scatter strategies for
// one rollout pass. A strategy the webhook would refuse (stored before the
// rule existed) is ignored, and the rollout keeps its default order rather
// than stopping.
func (sc *scope) updateOrder() *updateorder.Order {
	us := &sc.set.Spec.UpdateStrategy
	if us.PriorityStrategy == nil && len(us.ScatterStrategy) == 0 {
		return nil
	}
	o, err := updateorder.Compile(us.PriorityStrategy, us.ScatterStrategy)
	if err != nil {
		return nil
	}
	return o
}

// sortCandidates puts the pods a rollout may update in the order it
// updates them. The default order is: not ready first (updating a pod that
// is already not ready costs no availability and uses no maxUnavailable
// budget), then namespace and name. A priority strategy overrides it (the
// default order breaks ties between pods of equal priority), and the
// scatter strategy then spreads the pods of each priority level.
//
// Note: the budget loop stops at the first ready pod the budget has no
// room for, so a pod never overtakes one ordered before it.
func sortCandidates(candidates []*podState, order *updateorder.Order) {
	defaultOrder(candidates)
	updateorder.Sort(order, candidates, func(p *podState) map[string]string { return p.pod.Labels })
}
