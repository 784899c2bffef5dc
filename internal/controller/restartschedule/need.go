package restartschedule

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

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
	// windows, a blackout date); empty when they may. calendarClosed is
	// set when the windows or blackout dates alone close it: urgency
	// overrides them, not suspend.
	closed         string
	calendarClosed bool
	// nextReopen is, while the calendar is open, the first time restarts
	// may start again after it closes: a pod predicted to reach its limit
	// before then is replaced now. Zero when closed now, or when the
	// calendar does not close.
	nextReopen time.Time
	// urgentWithin is spec.urgency.predictedLimitWithin; 0 without urgency.
	urgentWithin time.Duration
	// workloadScope is action scope Workload: a candidate restarts its
	// whole workload, one restart per workload, and pod availability is
	// the workload's own strategy's concern. runInProgress says which run
	// holds every restart back (a workload restarting or waiting for its
	// turn); empty when none.
	workloadScope bool
	runInProgress string
	// series are the recent values of each memory and query trigger's
	// pods, oldest first, which predictions are fitted to.
	series seriesSet
	// lastTriggered is the time of the last eviction per workload
	// (status.lastTriggered, and evictions this process made that the
	// status may not show yet).
	lastTriggered map[string]time.Time
	// evicting is, per workload, the pods this process evicted that the
	// cache still shows neither terminating nor gone.
	evicting map[string]map[string]bool
	// usage is the latest working-set sample of each pod, by pod name;
	// nil when memory triggers have no data (metricsMissing says why).
	usage          map[string]PodUsage
	metricsMissing string
	// staleAfter: an older sample is not acted upon.
	staleAfter time.Duration
	// since is when each pod's container was first seen above a memory
	// threshold, or each pod above a query threshold (container ""), in
	// the current run of samples (the previous status.candidates), by
	// sinceKey.
	since map[string]time.Time
	// queried is the answer of each query trigger, by its index in
	// triggers.
	queried map[int]queryAnswer
}

func sinceKey(pod, container string) string { return pod + "/" + container }

// needCandidate is a pod a trigger names, and whether to evict it now.
type needCandidate struct {
	deckhandv1alpha1.RestartCandidate
	pod *corev1.Pod
	// over is how far past its threshold the pod is, as a fraction of the
	// threshold: the worst pod has the largest.
	over float64
	// evict is set when the pod is to be evicted now (HeldBy is empty).
	evict bool
	// sustainedAt is when a memory trigger's `for` is over; until then
	// the pod is held (holdFor says so).
	sustainedAt time.Time
	holdFor     time.Duration
}

// needPlan is planNeed's answer.
type needPlan struct {
	// candidates, worst first.
	candidates []needCandidate
	// recheck is when the triggers' answer may change with no event (a pod
	// reaching its maxAge or the minPodAge, a cooldown ending); zero when
	// only an event can change it.
	recheck time.Time
	// missing says, by MetricsUnavailable reason, which pods a trigger
	// could not judge ("web-1/app has no memory limit").
	missing map[string][]string
}

// miss records what a trigger could not judge, by MetricsUnavailable
// reason.
func (p *needPlan) miss(reason, format string, args ...any) {
	if p.missing == nil {
		p.missing = map[string][]string{}
	}
	p.missing[reason] = append(p.missing[reason], fmt.Sprintf(format, args...))
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
// to evict now (with action scope Workload, whose workload to restart: the
// worst candidate's, one per workload, while no run is in progress). A pod is held back, in this order, by dryRun, a closed
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
	for _, failed := range queryFailures(in) {
		plan.miss(ReasonQueryFailed, "%s", failed)
	}
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
			c, ok, next := evaluate(in, w.key, p, &plan)
			if !next.IsZero() {
				later(next)
			}
			if ok && !in.evicting[w.key][p.Name] {
				cands = append(cands, c)
			}
		}
		slices.SortStableFunc(cands, func(a, b needCandidate) int { return cmp.Or(rank(a, b, in.now), cmp.Compare(a.Pod, b.Pod)) })
		var chosen []string
		last, cooling := in.lastTriggered[w.key]
		cooling = cooling && cool > 0 && in.now.Before(last.Add(cool))
		for i := range cands {
			c := &cands[i]
			age := in.now.Sub(c.pod.CreationTimestamp.Time)
			switch {
			case c.sustainedAt.After(in.now):
				c.HeldBy = fmt.Sprintf("for %s: above the threshold since %s", c.holdFor, formatSlot(c.Since.Time))
				later(c.sustainedAt)
			case in.dryRun:
				c.HeldBy = holdDryRun
			case in.closed != "" && !(c.Urgent && in.calendarClosed):
				c.HeldBy = in.closed
			case age < minAge:
				c.HeldBy = fmt.Sprintf("minPodAge %s: the pod is %s old", minAge, age.Truncate(time.Second))
				later(c.pod.CreationTimestamp.Add(minAge))
			case cooling:
				c.HeldBy = fmt.Sprintf("cooldown %s: the workload's last triggered replacement was at %s", cool, formatSlot(last))
				later(last.Add(cool))
			case in.workloadScope && in.runInProgress != "":
				c.HeldBy = in.runInProgress
			case in.workloadScope && len(chosen) > 0:
				c.HeldBy = fmt.Sprintf("%s is restarted for %s", w.key, chosen[0])
			case in.workloadScope:
				c.evict = true
				chosen = append(chosen, c.Pod)
			case unavailable >= limit && len(chosen) > 0:
				c.HeldBy = fmt.Sprintf(holdMaxConcurrent+"%d: after the eviction of %s", limit, strings.Join(chosen, ", "))
			case unavailable >= limit:
				c.HeldBy = fmt.Sprintf(holdMaxConcurrent+"%d: %d pod(s) of %s unavailable", limit, unavailable, w.key)
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
	slices.SortStableFunc(plan.candidates, func(a, b needCandidate) int { return rank(a, b, in.now) })
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

// better reports whether candidate a ranks before b: an urgent one first,
// then one whose triggers are sustained, then the one further past its
// threshold.
func better(a, b needCandidate, now time.Time) bool {
	if a.Urgent != b.Urgent {
		return a.Urgent
	}
	if sa, sb := !a.sustainedAt.After(now), !b.sustainedAt.After(now); sa != sb {
		return sa
	}
	return a.over > b.over
}

// rank orders candidates worst first (see better).
func rank(a, b needCandidate, now time.Time) int {
	switch {
	case better(a, b, now):
		return -1
	case better(b, a, now):
		return 1
	}
	return 0
}
