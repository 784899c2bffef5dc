package sidecarset

import (
	"github.com/deckhand-dev/deckhand/internal/updateorder"
)

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
