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
		inPlace:        s.InPlaceIfPossible == nil || *s.InPlaceIfPossible,
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
// Without a rollout in progress it is exactly a ReplicaSet: create or delete
// the difference to spec.replicas (at most burstReplicas per sync), deleting
// in upstream's order.
//
// While paused, a pending rollout is left where it is and the PodSet only
// scales, as a ReplicaSet; a scale-down takes old-revision pods first, as
// during a rollout, because that moves no pod to another template.
//
// During a RollingUpdate rollout (more than partition old-revision pods):
//   - the PodSet may hold spec.replicas + surge pods, where surge is
//     maxSurge capped by the number of old pods that must be recreated;
//     terminating pods count against that total;
//   - old pods are updated (in place when possible, otherwise deleted and
//     recreated by a later sync) in this order: unavailable ones first (they
//     cost no availability), then upstream's deletion order;
//   - an available pod is touched only while more than
//     spec.replicas - maxUnavailable pods are available.
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
		case diff > 0 && oldToUpdate > 0:
			p.delete = oldFirst(in.pods, all, in.now)[:min(diff, burstReplicas)]
		case diff > 0:
			victims := append([]*corev1.Pod(nil), all...)
			sortForDeletion(victims, all, in.now)
			p.delete = victims[:min(diff, burstReplicas)]
		}
		return p
	}
	p.rolling = true

	views := map[*corev1.Pod]podView{}
	available := 0
	for _, v := range in.pods {
		views[v.pod] = v
		if v.available {
			available++
		}
	}

	// Old pods in update order: unavailable first, then upstream's order.
	cands := append([]*corev1.Pod(nil), old...)
	sortForDeletion(cands, all, in.now)
	sort.SliceStable(cands, func(i, j int) bool {
		return !views[cands[i]].available && views[cands[j]].available
	})
	cands = cands[:oldToUpdate]

	recreate := 0
	for _, c := range cands {
		if !(in.strategy.inPlace && views[c].inPlaceOK) {
			recreate++
		}
	}
	target := in.replicas + min(in.strategy.maxSurge, recreate)

	if active > target {
		// Scale down during a rollout: old pods go first.
		p.delete = oldFirst(in.pods, all, in.now)[:min(active-target, burstReplicas)]
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

// oldFirst orders pods for a scale-down while old-revision pods remain: old
// pods go first, each group in upstream's deletion order.
func oldFirst(pods []podView, all []*corev1.Pod, now time.Time) []*corev1.Pod {
	var old, newer []*corev1.Pod
	for _, v := range pods {
		if v.updated {
			newer = append(newer, v.pod)
		} else {
			old = append(old, v.pod)
		}
	}
	sortForDeletion(old, all, now)
	sortForDeletion(newer, all, now)
	return append(old, newer...)
}
