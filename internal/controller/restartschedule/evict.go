package restartschedule

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/eviction"
	"github.com/deckhand-dev/deckhand/internal/reconcileutil"
)

// Reasons of the Triggered condition and of the Events of triggered
// evictions.
const (
	// ReasonPodEvicted: a pod a trigger named was evicted (Normal Event).
	ReasonPodEvicted = "PodEvicted"
	// ReasonEvictionBlocked: the API server refused an eviction, a
	// PodDisruptionBudget most often (Normal Event: it is retried).
	ReasonEvictionBlocked = "EvictionBlocked"
	// ReasonEvictionFailed: an eviction failed otherwise (Warning Event).
	ReasonEvictionFailed = "EvictionFailed"
	// ReasonWouldEvict: dryRun, a pod that would have been evicted (Normal
	// Event).
	ReasonWouldEvict = "WouldEvict"
	// ReasonUrgentRestart: a pod predicted to reach its limit within
	// spec.urgency.predictedLimitWithin was evicted, whatever the calendar
	// (Normal Event, beside PodEvicted).
	ReasonUrgentRestart = "UrgentRestart"
	// ReasonRestartTriggered: action scope Workload, a trigger named a pod
	// and its workload's rolling restart was queued (Normal Event).
	ReasonRestartTriggered = "RestartTriggered"
	// ReasonWouldRestart: dryRun with action scope Workload, a workload
	// that would have been restarted (Normal Event).
	ReasonWouldRestart = "WouldRestart"
	// ReasonCandidates: the Triggered condition is True.
	ReasonCandidates = "Candidates"
	// ReasonNoCandidates: the Triggered condition is False.
	ReasonNoCandidates = "NoCandidates"
)

// heldRestarting is the heldBy of a candidate whose workload's restart
// was queued in this pass.
const heldRestarting = "restarting its workload"

// blockedRetry is how soon an eviction a PodDisruptionBudget refused is
// tried again: the budget changes with pod readiness, which this controller
// does not watch.
const blockedRetry = 5 * time.Second

// Triggers read the pods of their target workloads from the cache.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch,roleName=manager-restartschedule-role
// Pods a trigger names are replaced through the Eviction API only, so that
// PodDisruptionBudgets are honoured: never deleted.
// +kubebuilder:rbac:groups="",resources=pods/eviction,verbs=create,roleName=manager-restartschedule-role

// evictedPod is what is kept with an eviction this process made
// (Reconciler.evicted, by schedule and pod UID) until the cache shows the
// pod terminating or gone: an eviction the cache does not show yet still
// counts against maxConcurrent, and its time against the cooldown.
type evictedPod struct {
	workload, pod string
}

// replaceOnNeed applies spec.triggers: it lists the pods they name in
// status.candidates and evicts those planNeed chooses.
func (r *Reconciler) replaceOnNeed(ctx context.Context, s *scope) (ctrl.Result, error) {
	rs, st := s.rs, &s.rs.Status
	if len(rs.Spec.Triggers) == 0 {
		st.Candidates, st.CandidateCount, st.LastTriggered = nil, 0, nil
		meta.RemoveStatusCondition(&st.Conditions, deckhandv1alpha1.RestartScheduleTriggeredCondition)
		meta.RemoveStatusCondition(&st.Conditions, deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition)
		return ctrl.Result{}, nil
	}
	if s.patchedWorkloads {
		// This reconcile leaves its status to the next one (it restarted a
		// workload), which would lose the record of an eviction.
		return ctrl.Result{}, nil
	}
	s.triggers = true
	targets, err := listTargets(ctx, r.Client, rs)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the workloads of spec.target: %w", err)
	}
	in := needInput{now: s.now, triggers: rs.Spec.Triggers, action: rs.Spec.Action, dryRun: rs.Spec.DryRun,
		lastTriggered: map[string]time.Time{}, evicting: map[string]map[string]bool{},
		workloadScope: rs.Spec.Action.Scope == deckhandv1alpha1.RestartScopeWorkload}
	if n := len(st.Active) + len(st.Pending); in.workloadScope && n > 0 {
		in.runInProgress = fmt.Sprintf("%s is in progress (%d workload(s) restarting or waiting)", describeRun(runSlot(st), runTrigger(st)), n)
	}
	var byWorkload map[string][]*corev1.Pod
	if len(targets) > 0 {
		if byWorkload, err = r.podsByWorkload(ctx, rs.Namespace); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing pods: %w", err)
		}
	}
	for _, t := range targets {
		w, err := r.workloadPods(ctx, rs.Namespace, t, byWorkload)
		if err != nil {
			return ctrl.Result{}, err
		}
		if w != nil {
			in.workloads = append(in.workloads, *w)
		}
	}
	for _, c := range st.LastTriggered {
		in.lastTriggered[c.Workload] = c.Time.Time
	}
	if err := r.readUsage(ctx, s, &in); err != nil {
		return ctrl.Result{}, err
	}
	r.readQueries(ctx, s, &in)
	in.series = r.series.update(rs.UID, rs.Generation, s.now, observeSeries(in), func(i int) time.Duration { return fitWindow(rs.Spec.Triggers[i]) })
	if u := rs.Spec.Urgency; u != nil {
		in.urgentWithin = u.PredictedLimitWithin.Duration
	}
	// An eviction counts as in progress until the cache shows its pod
	// terminating or gone.
	var seen map[types.UID]*corev1.Pod // built for the first in-flight eviction only
	pending := r.evicted.Sweep(rs.UID, s.now, func(uid types.UID, _ eviction.Record[evictedPod]) bool {
		if seen == nil {
			seen = map[types.UID]*corev1.Pod{}
			for _, w := range in.workloads {
				for _, p := range w.pods {
					seen[p.UID] = p
				}
			}
		}
		p, ok := seen[uid]
		return !ok || p.DeletionTimestamp != nil
	})
	for _, ev := range pending {
		w := ev.Info.workload
		if in.evicting[w] == nil {
			in.evicting[w] = map[string]bool{}
		}
		in.evicting[w][ev.Info.pod] = true
		if ev.At.After(in.lastTriggered[w]) {
			in.lastTriggered[w] = ev.At
		}
	}
	switch {
	case rs.Spec.Suspend:
		in.closed = "suspended (spec.suspend)"
	case s.invalidReason != "":
		// Without a valid spec the calendar is unknown.
		in.closed = s.invalidMsg
	default:
		if why := s.cal.Blocked(s.now); why != "" {
			in.closed, in.calendarClosed = why, true
			if next, err := s.cal.NextAllowed(s.now); err == nil {
				s.waitUntilEarliest(next)
			}
		} else if closing, ok := s.cal.NextClosing(s.now); ok {
			if reopen, err := s.cal.NextAllowed(closing); err == nil {
				in.nextReopen = reopen
			}
		}
	}

	plan := planNeed(in)
	var res ctrl.Result
	for i := range plan.candidates {
		c := &plan.candidates[i]
		if in.dryRun && c.HeldBy == holdDryRun && previouslyListed(st.Candidates, c.Pod) == "" {
			if in.workloadScope {
				s.event(c.pod, corev1.EventTypeNormal, ReasonWouldRestart, "Restart", "dryRun: would restart %s for %s (%s: %s, limit %s)", c.Workload, c.Pod, c.Trigger, c.Value, c.Limit)
			} else {
				s.event(c.pod, corev1.EventTypeNormal, ReasonWouldEvict, "Evict", "dryRun: would evict %s of %s (%s: %s, limit %s)", c.Pod, c.Workload, c.Trigger, c.Value, c.Limit)
			}
		}
		if !c.evict {
			continue
		}
		if in.workloadScope {
			queueTriggered(s, c, &in)
			res = reconcileutil.LowestNonZero(res, requeueToStart(0))
			continue
		}
		result, err := eviction.Evict(ctx, r.Client, c.pod, false)
		podEvictions.WithLabelValues(string(c.Trigger), result.String()).Inc()
		switch result {
		case eviction.Evicted:
			r.evicted.Add(rs.UID, c.pod.UID, s.now, evictedPod{workload: c.Workload, pod: c.Pod})
			start := metav1.NewTime(s.now)
			events := []pendingEvent{newEvent(c.pod, corev1.EventTypeNormal, ReasonPodEvicted, "Evict", "evicted %s of %s: %s %s, limit %s", c.Pod, c.Workload, c.Trigger, c.Value, c.Limit)}
			if c.Urgent {
				events = append(events, newEvent(c.pod, corev1.EventTypeNormal, ReasonUrgentRestart, "Evict", "evicted %s of %s at once: %s%s", c.Pod, c.Workload, describeNeed(*c, s.now), outside(in.closed)))
			}
			s.recordEviction(evictionRecord{workload: c.Workload, events: events, record: deckhandv1alpha1.RestartRecord{
				ScheduledTime: start, Trigger: c.Trigger, Workload: c.Workload, Pod: c.Pod, Value: c.Value,
				PredictedLimitAt: c.PredictedLimitAt, StartTime: &start, CompletionTime: &start, Result: deckhandv1alpha1.RestartSucceeded,
				Message: "evicted: " + describeNeed(*c, s.now)}})
			c.HeldBy = "evicted"
		case eviction.Blocked:
			// Never forced: the pod stays a candidate and the eviction is
			// asked again.
			c.HeldBy = holdPodDisruptionBudget + eviction.DisruptionMessage(err)
			if previouslyListed(st.Candidates, c.Pod) != c.HeldBy {
				s.event(c.pod, corev1.EventTypeNormal, ReasonEvictionBlocked, "Evict", "eviction of %s refused: %s", c.Pod, eviction.DisruptionMessage(err))
			}
			res = reconcileutil.LowestNonZero(res, requeueIn(blockedRetry))
		case eviction.Stale:
			c.HeldBy = "gone or replaced before its eviction"
		default:
			c.HeldBy = "eviction failed: " + err.Error()
			s.event(c.pod, corev1.EventTypeWarning, ReasonEvictionFailed, "Evict", "eviction of %s failed: %v", c.Pod, err)
			res = reconcileutil.LowestNonZero(res, requeueIn(blockedRetry))
		}
	}
	writeCandidates(s, plan)
	s.missing = plan.missing
	if in.metricsMissing != "" {
		if s.missing == nil {
			s.missing = map[string][]string{}
		}
		s.missing[ReasonMetricsAPIUnavailable] = []string{in.metricsMissing}
	}
	if !plan.recheck.IsZero() {
		res = reconcileutil.LowestNonZero(res, requeueToStart(plan.recheck.Sub(s.now)+requeueDelay))
	}
	if usesMemory(in.triggers) || usesQuery(in.triggers) {
		// Working sets and query answers change with no event: read the
		// next samples.
		res = reconcileutil.LowestNonZero(res, requeueIn(min(r.pollInterval(), DefaultMetricsResolution)))
	}
	if len(plan.candidates) > 0 {
		// Held pods wait for pods to become Ready, budgets and windows,
		// which no watch here reports.
		res = reconcileutil.LowestNonZero(res, requeueIn(r.pollInterval()))
	}
	return res, nil
}

// queueTriggered queues the rolling restart of c's workload that c's
// trigger asks for (action scope Workload): a run of its own, started by
// the next reconcile once this status records it, as a run-now run is. An
// urgent candidate's restart ignores the calendar it was chosen outside.
// At most maxListedPending workloads wait at once.
func queueTriggered(s *scope, c *needCandidate, in *needInput) {
	st := &s.rs.Status
	if len(st.Pending) >= maxListedPending {
		// status.pending holds no more: a later pass queues the workload,
		// once the run has started some.
		c.HeldBy = fmt.Sprintf("%d workloads already wait for their restart", len(st.Pending))
		return
	}
	kind, name, _ := strings.Cut(c.Workload, "/")
	st.Pending = append(st.Pending, deckhandv1alpha1.RestartPending{Kind: kind, Name: name, ScheduledTime: metav1.NewTime(s.now.Truncate(time.Second)),
		Trigger: c.Trigger, Pod: c.Pod, Value: c.Value, IgnoreWindows: c.Urgent && in.calendarClosed})
	setLastTriggered(st, c.Workload, s.now)
	s.runStarted = true
	c.HeldBy = heldRestarting
	s.event(c.pod, corev1.EventTypeNormal, ReasonRestartTriggered, "Restart", "restarting %s: %s", c.Workload, describeNeed(*c, s.now))
	if c.Urgent {
		s.event(c.pod, corev1.EventTypeNormal, ReasonUrgentRestart, "Restart", "restarting %s at once: %s%s", c.Workload, describeNeed(*c, s.now), outside(in.closed))
	}
}

// describeNeed says what named a candidate: its value over the threshold and since
// when, or its prediction.
func describeNeed(c needCandidate, now time.Time) string {
	var parts []string
	if c.Since != nil {
		parts = append(parts, fmt.Sprintf("%s, over %s (%s since %s)", c.Value, c.Limit, c.Trigger, formatSlot(c.Since.Time)))
	} else {
		parts = append(parts, fmt.Sprintf("%s (%s, threshold %s)", c.Value, c.Trigger, c.Limit))
	}
	if c.PredictedLimitAt != nil {
		parts = append(parts, fmt.Sprintf("predicted to reach %s at %s (in %s)", c.PredictedLimit, formatSlot(c.PredictedLimitAt.Time),
			max(0, c.PredictedLimitAt.Sub(now)).Truncate(time.Second)))
	}
	if c.Urgent {
		parts = append(parts, "within spec.urgency.predictedLimitWithin")
	}
	return strings.Join(parts, ", ")
}

// outside names the calendar an urgent eviction overrode, if any.
func outside(closed string) string {
	if closed == "" {
		return ""
	}
	return "; outside the calendar: " + closed
}

// previouslyListed is what held pod back in the previous status ("" when it
// was not listed), so that an unchanged refusal is told once.
func previouslyListed(prev []deckhandv1alpha1.RestartCandidate, pod string) string {
	for _, c := range prev {
		if c.Pod == pod {
			if c.HeldBy == "" {
				return "listed"
			}
			return c.HeldBy
		}
	}
	return ""
}

// setLastTriggered records an eviction in workload at t, dropping the
// entries whose cooldown is over.
func setLastTriggered(st *deckhandv1alpha1.RestartScheduleStatus, workload string, t time.Time) {
	st.LastTriggered = slices.DeleteFunc(st.LastTriggered, func(c deckhandv1alpha1.RestartCooldown) bool { return c.Workload == workload })
	st.LastTriggered = append(st.LastTriggered, deckhandv1alpha1.RestartCooldown{Workload: workload, Time: metav1.NewTime(t)})
}

// writeCandidates lists the plan's candidates in the status, at most
// maxListedCandidates, and forgets cooldowns that are over.
func writeCandidates(s *scope, plan needPlan) {
	st := &s.rs.Status
	cool := cooldown(s.rs.Spec.Action)
	st.LastTriggered = slices.DeleteFunc(st.LastTriggered, func(c deckhandv1alpha1.RestartCooldown) bool {
		return !s.now.Before(c.Time.Add(cool))
	})
	if len(st.LastTriggered) > maxListedCandidates {
		st.LastTriggered = st.LastTriggered[len(st.LastTriggered)-maxListedCandidates:]
	}
	st.Candidates = nil
	for _, c := range plan.candidates[:min(len(plan.candidates), maxListedCandidates)] {
		c.HeldBy = truncateMessage(c.HeldBy)
		st.Candidates = append(st.Candidates, c.RestartCandidate)
	}
	st.CandidateCount = int32(len(plan.candidates))
	s.candidates = plan.candidates
}

// setTriggered sets the Triggered condition from the candidates.
func setTriggered(s *scope, set func(typ string, status metav1.ConditionStatus, reason, msg string)) {
	if len(s.candidates) == 0 {
		set(deckhandv1alpha1.RestartScheduleTriggeredCondition, metav1.ConditionFalse, ReasonNoCandidates, "no pod needs replacing")
		return
	}
	held := 0
	for _, c := range s.candidates {
		if c.HeldBy != "" && c.HeldBy != "evicted" && c.HeldBy != heldRestarting {
			held++
		}
	}
	first := s.candidates[0]
	msg := fmt.Sprintf("%d pod(s) need replacing, %d held back; worst: %s (%s %s, limit %s)", len(s.candidates), held, first.Pod, first.Trigger, first.Value, first.Limit)
	if first.HeldBy != "" {
		msg += ": " + first.HeldBy
	}
	set(deckhandv1alpha1.RestartScheduleTriggeredCondition, metav1.ConditionTrue, ReasonCandidates, msg)
}
