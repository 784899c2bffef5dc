package restartschedule

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// evaluate applies the triggers to one pod: the worst trigger that names
// it, and when a trigger will name it if none does yet. What a memory
// trigger cannot judge is added to plan.missing (failed queries are added
// once by planNeed).
func evaluate(in needInput, workload string, p *corev1.Pod, plan *needPlan) (c needCandidate, ok bool, next time.Time) {
	age := in.now.Sub(p.CreationTimestamp.Time)
	consider := func(cand needCandidate) {
		if !ok || better(cand, c, in.now) {
			c, ok = cand, true
		}
	}
	for i, t := range in.triggers {
		if t.Memory != nil {
			for _, cand := range evaluateMemory(in, workload, p, i, t.Memory, plan) {
				consider(cand)
			}
			continue
		}
		if t.Query != nil {
			if cand, named := evaluateQuery(in, workload, p, i, t.Query); named {
				consider(cand)
			}
			continue
		}
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
		sinceT := metav1.NewTime(since)
		consider(needCandidate{pod: p, over: float64(age-maxAge) / float64(maxAge), RestartCandidate: deckhandv1alpha1.RestartCandidate{
			Pod: p.Name, Workload: workload, Trigger: deckhandv1alpha1.RestartTriggerPodAge,
			Value: age.Truncate(time.Second).String() + " old", Limit: maxAge.String(), Since: &sinceT,
		}})
	}
	return c, ok, next
}
