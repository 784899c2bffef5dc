package restartschedule

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// Defaults of spec.action, as the CRD schema states them (a unit test builds
// objects without the schema).
const (
	defaultMinPodAge        = 10 * time.Minute
	defaultPodsUnavailable  = 1
	maxListedCandidates     = 100
	holdDryRun              = "dryRun"
	holdPodDisruptionBudget = "PodDisruptionBudget: "
)

// needWorkload is one target workload and the pods it owns.
type needWorkload struct {
	key string
	// desired is how many pods the workload wants (its replicas; for a
	// DaemonSet, the nodes it schedules on).
	desired int
	pods    []*corev1.Pod
}

// needInput is what planNeed decides from: no clock, no client.
type needInput struct {
	now       time.Time
	triggers  []deckhandv1alpha1.RestartNeedTrigger
	action    deckhandv1alpha1.RestartAction
	dryRun    bool
	workloads []needWorkload
	// closed says why restarts may not start now (suspended, outside the
	// windows, a blackout date); empty when they may.
	closed string
	// lastTriggered is the time of the last eviction per workload
	// (status.lastTriggered, and evictions this process made that the
	// status may not show yet).
	lastTriggered map[string]time.Time
	// evicting is, per workload, the pods this process evicted that the
	// cache still shows neither terminating nor gone.
	evicting map[string]map[string]bool
}

// needCandidate is a pod a trigger names, and whether to evict it now.
type needCandidate struct {
	deckhandv1alpha1.RestartCandidate
	pod *corev1.Pod
	// over is how far past its threshold the pod is, as a fraction of the
	// threshold: the worst pod has the largest.
	over float64
	// evict is set when the pod is to be evicted now (HeldBy is empty).
	evict bool
}

// needPlan is planNeed's answer.
type needPlan struct {
	// candidates, worst first.
	candidates []needCandidate
	// recheck is when the triggers' answer may change with no event (a pod
	// reaching its maxAge or the minPodAge, a cooldown ending); zero when
	// only an event can change it.
	recheck time.Time
}

func minPodAge(a deckhandv1alpha1.RestartAction) time.Duration {
	if a.MinPodAge == nil {
		return defaultMinPodAge
	}
	return a.MinPodAge.Duration
}

func cooldown(a deckhandv1alpha1.RestartAction) time.Duration {
	if a.Cooldown == nil {
		return 0
	}
	return a.Cooldown.Duration
}

func podsUnavailable(a deckhandv1alpha1.RestartAction) int {
	if a.MaxConcurrent < 1 {
		return defaultPodsUnavailable
	}
	return int(a.MaxConcurrent)
}

// planNeed lists the pods the triggers name, worst first, and chooses which
// to evict now. A pod is held back, in this order, by dryRun, a closed
// calendar, minPodAge, the workload's cooldown, and maxConcurrent: a pod is
// evicted only while fewer than maxConcurrent pods of its workload are
// unavailable (terminating, not Ready, missing from the desired count, or
// evicted and not yet seen terminating), counting the evictions chosen here.
// With a cooldown, at most one pod of a workload is chosen at a time.
func planNeed(in needInput) needPlan {
	var plan needPlan
	later := func(t time.Time) {
		if t.After(in.now) && (plan.recheck.IsZero() || t.Before(plan.recheck)) {
			plan.recheck = t
		}
	}
	minAge, cool, limit := minPodAge(in.action), cooldown(in.action), podsUnavailable(in.action)
	for _, w := range in.workloads {
		unavailable := max(0, w.desired-len(activePods(w.pods)))
		var cands []needCandidate
		for _, p := range w.pods {
			if p.DeletionTimestamp != nil || !podutil.IsPodReady(p) || in.evicting[w.key][p.Name] {
				unavailable++
			}
			if !podutil.IsPodActive(p) {
				// Already being replaced.
				continue
			}
			c, ok, next := evaluate(in, w.key, p)
			if !next.IsZero() {
				later(next)
			}
			if ok && !in.evicting[w.key][p.Name] {
				cands = append(cands, c)
			}
		}
		slices.SortStableFunc(cands, func(a, b needCandidate) int {
			return cmp.Or(cmp.Compare(b.over, a.over), cmp.Compare(a.Pod, b.Pod))
		})
		var chosen []string
		last, cooling := in.lastTriggered[w.key]
		cooling = cooling && cool > 0 && in.now.Before(last.Add(cool))
		for i := range cands {
			c := &cands[i]
			age := in.now.Sub(c.pod.CreationTimestamp.Time)
			switch {
			case in.dryRun:
				c.HeldBy = holdDryRun
			case in.closed != "":
				c.HeldBy = in.closed
			case age < minAge:
				c.HeldBy = fmt.Sprintf("minPodAge %s: the pod is %s old", minAge, age.Truncate(time.Second))
				later(c.pod.CreationTimestamp.Add(minAge))
			case cooling:
				c.HeldBy = fmt.Sprintf("cooldown %s: the workload's last eviction was at %s", cool, formatSlot(last))
				later(last.Add(cool))
			case unavailable >= limit && len(chosen) > 0:
				c.HeldBy = fmt.Sprintf("maxConcurrent %d: after the eviction of %s", limit, strings.Join(chosen, ", "))
			case unavailable >= limit:
				c.HeldBy = fmt.Sprintf("maxConcurrent %d: %d pod(s) of %s unavailable", limit, unavailable, w.key)
			default:
				c.evict = true
				chosen = append(chosen, c.Pod)
				unavailable++
				if cool > 0 {
					cooling, last = true, in.now
				}
			}
		}
		plan.candidates = append(plan.candidates, cands...)
	}
	slices.SortStableFunc(plan.candidates, func(a, b needCandidate) int { return cmp.Compare(b.over, a.over) })
	return plan
}

// activePods counts the pods that are neither finished nor being deleted.
func activePods(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if podutil.IsPodActive(p) {
			out = append(out, p)
		}
	}
	return out
}

// evaluate applies the triggers to one pod: the worst trigger that names
// it, and when a trigger will name it if none does yet.
func evaluate(in needInput, workload string, p *corev1.Pod) (c needCandidate, ok bool, next time.Time) {
	age := in.now.Sub(p.CreationTimestamp.Time)
	for _, t := range in.triggers {
		if t.PodAge == nil {
			continue
		}
		maxAge := t.PodAge.MaxAge.Duration
		if maxAge <= 0 {
			continue
		}
		since := p.CreationTimestamp.Add(maxAge)
		if age <= maxAge {
			if next.IsZero() || since.Before(next) {
				// Just past it: a pod exactly maxAge old is not older.
				next = since.Add(time.Millisecond)
			}
			continue
		}
		over := float64(age-maxAge) / float64(maxAge)
		if ok && over <= c.over {
			continue
		}
		ok = true
		sinceT := metav1.NewTime(since)
		c = needCandidate{pod: p, over: over, RestartCandidate: deckhandv1alpha1.RestartCandidate{
			Pod: p.Name, Workload: workload, Trigger: deckhandv1alpha1.RestartTriggerPodAge,
			Value: age.Truncate(time.Second).String() + " old", Limit: maxAge.String(), Since: &sinceT,
		}}
	}
	return c, ok, next
}
