package podset

import (
	"math"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// podPhaseToOrdinal ranks phases for deletion: Pending < Unknown < Running.
var podPhaseToOrdinal = map[corev1.PodPhase]int{corev1.PodPending: 0, corev1.PodUnknown: 1, corev1.PodRunning: 2}

// rankedPods sorts pods into the order kube-controller-manager's ReplicaSet
// controller deletes them on scale-down (ActivePodsWithRanks, with the
// PodDeletionCost and LogarithmicScaleDown features on, as they are by
// default):
//
//  1. not yet scheduled before scheduled;
//  2. Pending before Unknown before Running;
//  3. not Ready before Ready;
//  4. lower controller.kubernetes.io/pod-deletion-cost first;
//  5. more pods of the same owner on the same node first;
//  6. Ready for a shorter time first (log2 buckets, ties broken by UID);
//  7. more container restarts first;
//  8. newer before older (log2 buckets, ties broken by UID).
type rankedPods struct {
	pods []*corev1.Pod
	// rank is the number of related active pods on the same node as pods[i].
	rank []int
	now  metav1.Time
}

func (s rankedPods) Len() int { return len(s.pods) }

func (s rankedPods) Swap(i, j int) {
	s.pods[i], s.pods[j] = s.pods[j], s.pods[i]
	s.rank[i], s.rank[j] = s.rank[j], s.rank[i]
}

func (s rankedPods) Less(i, j int) bool {
	pi, pj := s.pods[i], s.pods[j]
	// 1. Unassigned < assigned.
	if pi.Spec.NodeName != pj.Spec.NodeName && (pi.Spec.NodeName == "" || pj.Spec.NodeName == "") {
		return pi.Spec.NodeName == ""
	}
	// 2. Pending < Unknown < Running.
	if podPhaseToOrdinal[pi.Status.Phase] != podPhaseToOrdinal[pj.Status.Phase] {
		return podPhaseToOrdinal[pi.Status.Phase] < podPhaseToOrdinal[pj.Status.Phase]
	}
	// 3. Not ready < ready.
	readyI, readyJ := podutil.IsPodReady(pi), podutil.IsPodReady(pj)
	if readyI != readyJ {
		return !readyI
	}
	// 4. Lower deletion cost < higher deletion cost.
	if ci, cj := deletionCost(pi), deletionCost(pj); ci != cj {
		return ci < cj
	}
	// 5. Doubled up < not doubled up.
	if s.rank[i] != s.rank[j] {
		return s.rank[i] > s.rank[j]
	}
	// 6. Been ready for empty time < less time < more time.
	if readyI && readyJ {
		t1, t2 := podutil.PodReadyTime(pi), podutil.PodReadyTime(pj)
		if !t1.Equal(t2) {
			if s.now.IsZero() || t1.IsZero() || t2.IsZero() {
				return afterOrZero(t1, t2)
			}
			if d := logarithmicRankDiff(*t1, *t2, s.now); d != 0 {
				return d < 0
			}
			return pi.UID < pj.UID
		}
	}
	// 7. More container restarts < fewer restarts.
	if res := compareMaxContainerRestarts(pi, pj); res != nil {
		return *res
	}
	// 8. Empty creation time < newer < older.
	if !pi.CreationTimestamp.Equal(&pj.CreationTimestamp) {
		if s.now.IsZero() || pi.CreationTimestamp.IsZero() || pj.CreationTimestamp.IsZero() {
			return afterOrZero(&pi.CreationTimestamp, &pj.CreationTimestamp)
		}
		if d := logarithmicRankDiff(pi.CreationTimestamp, pj.CreationTimestamp, s.now); d != 0 {
			return d < 0
		}
		return pi.UID < pj.UID
	}
	return false
}

// sortForDeletion sorts pods in place, first to delete first. related are
// the pods that count for rule 5 (all active pods of the owner).
func sortForDeletion(pods, related []*corev1.Pod, now time.Time) {
	podsOnNode := map[string]int{}
	for _, p := range related {
		if podutil.IsPodActive(p) {
			podsOnNode[p.Spec.NodeName]++
		}
	}
	rank := make([]int, len(pods))
	for i, p := range pods {
		rank[i] = podsOnNode[p.Spec.NodeName]
	}
	sort.Sort(rankedPods{pods: pods, rank: rank, now: metav1.NewTime(now)})
}

// deletionCost reads controller.kubernetes.io/pod-deletion-cost; a missing
// or malformed value counts as 0, as upstream.
func deletionCost(p *corev1.Pod) int32 {
	v, ok := p.Annotations[deckhandv1alpha1.PodDeletionCostAnnotation]
	if !ok {
		return 0
	}
	c, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(c)
}

// afterOrZero reports whether t1 is after t2, treating a zero time as the
// latest possible.
func afterOrZero(t1, t2 *metav1.Time) bool {
	if t1.Time.IsZero() || t2.Time.IsZero() {
		return t1.Time.IsZero()
	}
	return t1.After(t2.Time)
}

// logarithmicRankDiff compares the ages of t1 and t2 on a log2 scale, so
// that pods of similar age tie (and are then ordered by UID, which spreads
// deletions pseudo-randomly among them).
func logarithmicRankDiff(t1, t2, now metav1.Time) int64 {
	d1 := now.Sub(t1.Time)
	d2 := now.Sub(t2.Time)
	r1, r2 := int64(-1), int64(-1)
	if d1 > 0 {
		r1 = int64(math.Log2(float64(d1)))
	}
	if d2 > 0 {
		r2 = int64(math.Log2(float64(d2)))
	}
	return r1 - r2
}

// maxContainerRestarts returns the highest restart count of the regular
// containers and of the restartable (sidecar) init containers.
func maxContainerRestarts(p *corev1.Pod) (regular, sidecar int) {
	for _, c := range p.Status.ContainerStatuses {
		regular = max(regular, int(c.RestartCount))
	}
	sidecars := map[string]bool{}
	for i := range p.Spec.InitContainers {
		if c := &p.Spec.InitContainers[i]; podutil.IsNativeSidecar(c) {
			sidecars[c.Name] = true
		}
	}
	for _, c := range p.Status.InitContainerStatuses {
		if sidecars[c.Name] {
			sidecar = max(sidecar, int(c.RestartCount))
		}
	}
	return regular, sidecar
}

func compareMaxContainerRestarts(pi, pj *corev1.Pod) *bool {
	ri, si := maxContainerRestarts(pi)
	rj, sj := maxContainerRestarts(pj)
	if ri != rj {
		res := ri > rj
		return &res
	}
	if si != sj {
		res := si > sj
		return &res
	}
	return nil
}
