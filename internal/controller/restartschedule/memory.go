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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
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
	items, err := r.PodMetrics.PodMetrics(ctx, s.rs.Namespace)
	if err != nil {
		in.metricsMissing = "listing metrics.k8s.io PodMetrics: " + err.Error()
		return nil
	}
	in.usage = make(map[string]podUsage, len(items))
	for _, pm := range items {
		u := podUsage{at: pm.Timestamp.Time, workingSet: make(map[string]int64, len(pm.Containers))}
		for _, c := range pm.Containers {
			if q, ok := c.Usage[corev1.ResourceMemory]; ok {
				u.workingSet[c.Name] = q.Value()
			}
		}
		in.usage[pm.Name] = u
	}
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
