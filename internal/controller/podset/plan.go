package podset

import (
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// strategy is an updateStrategy with its numbers resolved against
// spec.replicas.
type strategy struct {
	rolling        bool
	inPlace        bool
	maxSurge       int
	maxUnavailable int
	partition      int
	// evict: podReplacement Evict; replaced pods are evicted, not deleted.
	evict bool
}

// updatesInPlace reports whether the strategy updates pods in place when
// only their images change (inPlaceIfPossible, true when unset).
func updatesInPlace(s deckhandv1alpha1.PodSetUpdateStrategy) bool {
	return s.InPlaceIfPossible == nil || *s.InPlaceIfPossible
}

// resolveStrategy resolves percentages as Deployments do: maxSurge rounds up,
// maxUnavailable rounds down, and if both end up zero maxUnavailable becomes 1
// so that a rollout can always progress.
func resolveStrategy(s deckhandv1alpha1.PodSetUpdateStrategy, replicas int) strategy {
	def := intstr.FromString("25%")
	surgeVal, unavailVal := def, def
	if s.MaxSurge != nil {
		surgeVal = *s.MaxSurge
	}
	if s.MaxUnavailable != nil {
		unavailVal = *s.MaxUnavailable
	}
	surge, err := intstr.GetScaledValueFromIntOrPercent(&surgeVal, replicas, true)
	if err != nil || surge < 0 {
		surge = 0
	}
	unavail, err := intstr.GetScaledValueFromIntOrPercent(&unavailVal, replicas, false)
	if err != nil || unavail < 0 {
		unavail = 0
	}
	if surge == 0 && unavail == 0 {
		unavail = 1
	}
	out := strategy{
		rolling:        s.Type != deckhandv1alpha1.OnDeletePodSetStrategyType,
		inPlace:        updatesInPlace(s),
		maxSurge:       surge,
		maxUnavailable: unavail,
	}
	out.evict = s.PodReplacement == deckhandv1alpha1.EvictPodSetPodReplacement
	if s.Partition != nil && *s.Partition > 0 {
		out.partition = int(*s.Partition)
	}
	return out
}

// podView is what the planner needs to know about one active owned pod.
type podView struct {
	pod *corev1.Pod
	// updated: the pod is on the update revision.
	updated bool
	// available: Ready for minReadySeconds and not in an in-place update.
	available bool
	// inPlaceOK: the pod can reach the update revision by an image patch.
	inPlaceOK bool
	// updatedInPlace: the pod reached the update revision by an image
	// patch (it was not created on it).
	updatedInPlace bool
	// updating: the pod's image patch has not yet taken effect (the kubelet
	// has not reported the new images, or the pod is not Ready again), and
	// was sent less than progressDeadlineSeconds ago.
	updating bool
}

// planInput is the state one sync plans from.
type planInput struct {
	replicas    int
	pods        []podView
	terminating int
	strategy    strategy
	// paused: spec.paused; no old-revision pod is updated or replaced.
	paused bool
	now    time.Time
}

// plan is what one sync does: create pods, delete pods, patch images.
type plan struct {
	create  int
	delete  []*corev1.Pod
	inPlace []*corev1.Pod
	// evict are old pods replaced through the Eviction API (podReplacement
	// Evict); delete then holds only scale-down victims and, with Delete,
	// replaced pods.
	evict []*corev1.Pod
	// rolling is true while old-revision pods remain to be updated.
	rolling bool
}

// planSync decides the writes of one sync. It is pure: the same input gives
// the same plan.
//
// Without a rollout in progress it is a ReplicaSet: create or delete the
// difference to spec.replicas (at most burstReplicas per sync); a scale-down
// picks its pods as scaleDownVictims says.
//
// While paused, a pending rollout is left where it is and the PodSet only
// scales, as a ReplicaSet; a scale-down takes old-revision pods first, as
// during a rollout, because that moves no pod to another template.
//
// During a RollingUpdate rollout (more than partition old-revision pods):
//   - the PodSet creates pods up to spec.replicas + surge, where surge is
//     maxSurge capped by the number of old pods that need a pod standing in
//     for them: those that must be recreated, and, when maxUnavailable is 0,
//     every old pod to update, in place or not; terminating pods count
//     against that total;
//   - it deletes pods only above spec.replicas + maxSurge (a lowered
//     spec.replicas); the surge left once every old pod is updated is
//     removed by the ReplicaSet scale-down that follows the rollout;
//   - old pods are updated (in place when possible, otherwise deleted and
//     recreated by a later sync) in this order: unavailable ones first (they
//     cost no availability), then upstream's deletion order;
//   - an available pod is touched only while more than
//     spec.replicas - maxUnavailable pods are available.
//
// Note: with maxUnavailable 0 (25% of 1 to 3 replicas rounds down to 0) no
// old pod may become unavailable before a new one is available, so an
// in-place rollout runs on the surge: the surge pods' availability lets old
// pods be patched one budget at a time, and the surplus goes at the end.
func planSync(in planInput) plan {
	var p plan
	var all, old []*corev1.Pod
	for _, v := range in.pods {
		all = append(all, v.pod)
		if !v.updated {
			old = append(old, v.pod)
		}
	}
	active := len(in.pods)
	oldToUpdate := 0
	if in.strategy.rolling {
		oldToUpdate = max(0, len(old)-in.strategy.partition)
	}

	if oldToUpdate == 0 || in.paused {
		diff := active - in.replicas
		switch {
		case diff < 0:
			p.create = min(-diff, burstReplicas)
		case diff > 0:
			p.delete = scaleDownVictims(in, all, oldToUpdate > 0, diff)
		}
		return p
	}
	p.rolling = true

	views, available := viewsOf(in)

	// Old pods in update order: unavailable first, then upstream's order.
	cands := append([]*corev1.Pod(nil), old...)
	sortForDeletion(cands, all, in.now)
	sort.SliceStable(cands, func(i, j int) bool {
		return !views[cands[i]].available && views[cands[j]].available
	})
	cands = cands[:oldToUpdate]

	standIns := 0
	for _, c := range cands {
		if !(in.strategy.inPlace && views[c].inPlaceOK) {
			standIns++
		}
	}
	if in.strategy.maxUnavailable == 0 {
		standIns = len(cands)
	}
	target := in.replicas + min(in.strategy.maxSurge, standIns)

	if excess := active - (in.replicas + in.strategy.maxSurge); excess > 0 {
		// Scale down during a rollout: old pods go first.
		p.delete = scaleDownVictims(in, all, true, excess)
		return p
	}
	if room := target - active - in.terminating; room > 0 {
		p.create = min(room, burstReplicas)
	}

	budget := available - (in.replicas - in.strategy.maxUnavailable)
	for _, c := range cands {
		v := views[c]
		if v.available {
			if budget <= 0 {
				continue
			}
			budget--
		}
		switch {
		case in.strategy.inPlace && v.inPlaceOK:
			p.inPlace = append(p.inPlace, c)
		case len(p.delete)+len(p.evict) >= burstReplicas:
		case in.strategy.evict:
			p.evict = append(p.evict, c)
		default:
			p.delete = append(p.delete, c)
		}
	}
	return p
}

// scaleDownVictims picks up to n pods (at most burstReplicas) to delete for
// a scale-down, in this order:
//
//  1. unavailable pods (they cost no availability), then available ones,
//     then pods whose in-place update is under way (deleting one throws the
//     update away);
//  2. within each, when oldFirst (a rollout is pending), old-revision pods
//     first; then pods created on the update revision before pods updated
//     in place to it, which keep the name, IP and node the update kept them
//     for (so the surge of an in-place rollout is what goes once it ends);
//  3. then upstream's deletion order.
//
// An available pod is taken only while more than spec.replicas -
// maxUnavailable pods would stay available; the walk stops at the first one
// that is not, so that the pods behind it are not taken instead: the rest
// of the scale-down waits for pods to become available. Without pods in an
// in-place update this never holds a scale-down back: the unavailable pods
// go first, and what stays of the available ones is
// min(available, spec.replicas).
func scaleDownVictims(in planInput, all []*corev1.Pod, oldFirst bool, n int) []*corev1.Pod {
	views, available := viewsOf(in)
	group := func(v podView) int {
		switch {
		case v.updating:
			return 2
		case !v.available:
			return 0
		default:
			return 1
		}
	}
	kind := func(v podView) int {
		switch {
		case !v.updated && oldFirst:
			return 0
		case v.updated && !v.updatedInPlace:
			return 1
		default:
			return 2
		}
	}
	order := append([]*corev1.Pod(nil), all...)
	sortForDeletion(order, all, in.now)
	sort.SliceStable(order, func(i, j int) bool {
		vi, vj := views[order[i]], views[order[j]]
		if gi, gj := group(vi), group(vj); gi != gj {
			return gi < gj
		}
		return kind(vi) < kind(vj)
	})
	n = min(n, burstReplicas)
	budget := available - (in.replicas - in.strategy.maxUnavailable)
	var out []*corev1.Pod
	for _, p := range order {
		if len(out) == n {
			break
		}
		if views[p].available {
			if budget <= 0 {
				break
			}
			budget--
		}
		out = append(out, p)
	}
	return out
}

// viewsOf maps each active pod of in to its view, and counts the available
// ones.
func viewsOf(in planInput) (map[*corev1.Pod]podView, int) {
	views := make(map[*corev1.Pod]podView, len(in.pods))
	available := 0
	for _, v := range in.pods {
		views[v.pod] = v
		if v.available {
			available++
		}
	}
	return views, available
}
