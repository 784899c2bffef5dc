package restartschedule

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// MetricsUnavailable reasons.
const (
	// ReasonMetricsAPIUnavailable: the resource metrics API could not be
	// listed (absent, or failing).
	ReasonMetricsAPIUnavailable = "MetricsAPIUnavailable"
	// ReasonStaleMetrics: a pod has no sample, or only an old one.
	ReasonStaleMetrics = "StaleMetrics"
	// ReasonNoMemoryLimit: percentOfLimit on a container without a memory
	// limit.
	ReasonNoMemoryLimit = "NoMemoryLimit"
	// ReasonMetricsAvailable: the MetricsUnavailable condition is False.
	ReasonMetricsAvailable = "MetricsAvailable"
)

// usesMemory reports whether a memory trigger is set.
func usesMemory(triggers []deckhandv1alpha1.RestartNeedTrigger) bool {
	for _, t := range triggers {
		if t.Memory != nil {
			return true
		}
	}
	return false
}

// readUsage fills in the latest working-set samples of the namespace's
// pods and the previous runs of samples above the thresholds, when a
// memory trigger needs them. A metrics API that cannot be read is not an
// error of the reconcile: memory triggers then act on nothing, and the
// MetricsUnavailable condition says why.
func (r *Reconciler) readUsage(ctx context.Context, s *scope, in *needInput) error {
	if !usesMemory(in.triggers) {
		return nil
	}
	in.staleAfter = r.metricsStaleAfter()
	in.since = map[string]time.Time{}
	for _, c := range s.rs.Status.Candidates {
		if c.Trigger == deckhandv1alpha1.RestartTriggerMemory && c.Since != nil {
			in.since[sinceKey(c.Pod, c.Container)] = c.Since.Time
		}
	}
	if r.PodMetrics == nil {
		in.metricsMissing = "no resource metrics client"
		return nil
	}
	usage, err := r.PodMetrics.WorkingSets(ctx, s.rs.Namespace)
	if err != nil {
		in.metricsMissing = "listing metrics.k8s.io PodMetrics: " + err.Error()
		return nil
	}
	in.usage = usage
	return nil
}

// maxMissingListed bounds the pods the MetricsUnavailable message names.
const maxMissingListed = 5

// setMetricsUnavailable sets the MetricsUnavailable condition while memory
// or query triggers are set, with a Warning Event and a count when it turns True.
func setMetricsUnavailable(s *scope, set func(typ string, status metav1.ConditionStatus, reason, msg string)) {
	st := &s.rs.Status
	if !usesMemory(s.rs.Spec.Triggers) && !usesQuery(s.rs.Spec.Triggers) {
		meta.RemoveStatusCondition(&st.Conditions, deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition)
		return
	}
	if len(s.missing) == 0 {
		set(deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition, metav1.ConditionFalse, ReasonMetricsAvailable, "")
		return
	}
	reasons := slices.Sorted(maps.Keys(s.missing))
	var parts []string
	for _, reason := range reasons {
		pods := s.missing[reason]
		text := strings.Join(pods[:min(len(pods), maxMissingListed)], "; ")
		if len(pods) > maxMissingListed {
			text += fmt.Sprintf("; and %d more", len(pods)-maxMissingListed)
		}
		parts = append(parts, reason+": "+text)
	}
	msg := "not acted upon: " + strings.Join(parts, ". ")
	prev := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition)
	if prev == nil || prev.Status != metav1.ConditionTrue || prev.Reason != reasons[0] {
		s.event(nil, corev1.EventTypeWarning, reasons[0], "Evaluate", "%s", msg)
		triggerDataMissing.WithLabelValues(reasons[0]).Inc()
	}
	set(deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition, metav1.ConditionTrue, reasons[0], msg)
}

// evaluateMemory judges the containers of pod p against memory trigger
// number trigger. A container is a candidate when its latest sample is
// above the threshold; it is sustained once it has been above in every
// sample since `for` ago (since, carried from the previous status, ends
// with the first sample below). A container whose prediction names it
// (predict) is a candidate at once, above the threshold or not. No
// sample, a stale one, or no limit for percentOfLimit: no candidate, and
// plan.missing says so.
func evaluateMemory(in needInput, workload string, p *corev1.Pod, trigger int, m *deckhandv1alpha1.RestartMemoryTrigger, plan *needPlan) []needCandidate {
	if in.metricsMissing != "" {
		return nil
	}
	miss := plan.miss
	u, ok := in.usage[p.Name]
	switch {
	case !ok && in.now.Sub(p.CreationTimestamp.Time) > in.staleAfter:
		miss(ReasonStaleMetrics, "%s has no sample", p.Name)
		return nil
	case !ok:
		// Too young to have been sampled yet.
		return nil
	case in.now.Sub(u.At) > in.staleAfter:
		miss(ReasonStaleMetrics, "%s: the latest sample is %s old", p.Name, in.now.Sub(u.At).Truncate(time.Second))
		return nil
	}
	hold := defaultFor
	if m.For != nil {
		hold = m.For.Duration
	}
	var out []needCandidate
	for i := range p.Spec.Containers {
		ctr := &p.Spec.Containers[i]
		if m.Container != "" && ctr.Name != m.Container {
			continue
		}
		ws, ok := u.WorkingSet(ctr.Name)
		if !ok {
			continue
		}
		var threshold int64
		// The prediction aims at the container's limit, where the kernel
		// kills it; at above when it has none.
		limit, hasLimit := ctr.Resources.Limits[corev1.ResourceMemory]
		hasLimit = hasLimit && !limit.IsZero()
		switch {
		case m.Above != nil:
			threshold = m.Above.Value()
			if !hasLimit {
				limit = *m.Above
			}
		case !hasLimit:
			miss(ReasonNoMemoryLimit, "%s/%s has no memory limit", p.Name, ctr.Name)
			continue
		default:
			threshold = limit.Value() * int64(*m.PercentOfLimit) / 100
		}
		if threshold <= 0 {
			continue
		}
		c := needCandidate{pod: p, over: float64(ws-threshold) / float64(threshold)}
		named := predict(in, &c, seriesKey{trigger: trigger, pod: p.Name, container: ctr.Name}, float64(limit.Value()), limit.String())
		if !named && ws <= threshold {
			// Most pods, at every evaluation: nothing formatted for them.
			continue
		}
		limitText := fmt.Sprintf("%d%% of %s", ptr.Deref(m.PercentOfLimit, 0), limit.String())
		if m.Above != nil {
			limitText = m.Above.String()
		}
		c.RestartCandidate = deckhandv1alpha1.RestartCandidate{Pod: p.Name, Workload: workload, Container: ctr.Name,
			Trigger: deckhandv1alpha1.RestartTriggerMemory, Value: mebibytes(ws), Limit: limitText,
			PredictedLimitAt: c.PredictedLimitAt, PredictedLimit: c.PredictedLimit, Urgent: c.Urgent}
		if !named {
			since, ok := in.since[sinceKey(p.Name, ctr.Name)]
			if !ok || since.After(u.At) {
				since = u.At
			}
			c.Since, c.sustainedAt, c.holdFor = ptr.To(metav1.NewTime(since)), since.Add(hold), hold
		}
		out = append(out, c)
	}
	return out
}

// predict fits the trend of a pod's series and, when it rises, sets when
// it reaches limit in c. It reports whether the prediction alone names the
// pod, with no `for` to wait: it reaches its limit within
// spec.urgency.predictedLimitWithin (c.Urgent), or before restarts may
// start again once the open calendar closes.
func predict(in needInput, c *needCandidate, key seriesKey, limit float64, limitText string) (named bool) {
	at, ok := predictLimitAt(in.series[key].points(), limit)
	if !ok {
		return false
	}
	c.PredictedLimitAt, c.PredictedLimit = ptr.To(metav1.NewTime(at)), limitText
	c.Urgent = in.urgentWithin > 0 && !at.After(in.now.Add(in.urgentWithin))
	return c.Urgent || (!in.nextReopen.IsZero() && at.Before(in.nextReopen))
}

// mebibytes is a working set as a quantity of whole MiB, the precision a
// reader compares with a limit ("812Mi"); under 1Mi, in bytes.
func mebibytes(b int64) string {
	if b >= 1<<20 {
		b -= b % (1 << 20)
	}
	return resource.NewQuantity(b, resource.BinarySI).String()
}
