package restartschedule_test

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// rolloutDone is the controller's `kubectl rollout status` rule for a
// Deployment, applied to a watched object.
func rolloutDone(d *appsv1.Deployment) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas >= *d.Spec.Replicas &&
		s.Replicas <= s.UpdatedReplicas && s.AvailableReplicas >= s.UpdatedReplicas
}

// A selector over 3 Deployments with maxConcurrent 2: never more than 2
// rollouts in progress, 2 of them at once, and each Deployment restarted
// exactly once per run. The proof comes from one watch on the namespace's
// Deployments, whose events arrive in etcd revision order: the controller
// can only patch a third Deployment after its cache saw a rollout complete,
// which the watch delivers first.
func TestIntegrationMaxConcurrentTwo(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	labels := map[string]string{"tier": "pool"}
	names := []string{"a", "b", "c"}
	var ds []*appsv1.Deployment
	for _, n := range names {
		d := newDeployment(ns, n, 2, labels, nil)
		// Rollouts that last a few seconds, so that they overlap.
		d.Spec.MinReadySeconds = 2
		ds = append(ds, d)
	}
	createRolledOut(t, ds...)

	w, err := watchDeployments(ctx(t), ns)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	type report struct {
		maxInProgress int
		violations    []string
		// generations[name][restarted-at] is every generation seen with
		// that value: more than one means a second patch for the slot.
		generations map[string]map[string]map[int64]bool
		firstSlot   string
	}
	done := make(chan report, 1)
	go func() {
		r := report{generations: map[string]map[string]map[int64]bool{}}
		inProgress := map[string]bool{}
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			v := d.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]
			if v == "" {
				continue
			}
			if r.firstSlot == "" {
				r.firstSlot = v
			}
			if r.generations[d.Name] == nil {
				r.generations[d.Name] = map[string]map[int64]bool{}
			}
			if r.generations[d.Name][v] == nil {
				r.generations[d.Name][v] = map[int64]bool{}
			}
			r.generations[d.Name][v][d.Generation] = true
			inProgress[d.Name] = !rolloutDone(d)
			n := 0
			for _, p := range inProgress {
				if p {
					n++
				}
			}
			if n > r.maxInProgress {
				r.maxInProgress = n
			}
			if n > 2 {
				r.violations = append(r.violations, fmt.Sprintf("%d rollouts in progress at resourceVersion %s (%v)", n, d.ResourceVersion, inProgress))
			}
		}
		done <- r
	}()

	create(t, &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "@every 5s", HistoryLimit: 100, MaxConcurrent: 2,
			Target: deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: labels}}},
	})

	// The first run ends when all three have a result for its slot.
	var first metav1.Time
	rs := waitRS(t, ns, "pool", 90*time.Second, "each of the 3 Deployments has a result in the first run", func(rs *deckhandv1alpha1.RestartSchedule) bool {
		var earliest *metav1.Time
		for _, h := range rs.Status.History {
			if h.Workload != "" && (earliest == nil || h.ScheduledTime.Before(earliest)) {
				earliest = h.ScheduledTime.DeepCopy()
			}
		}
		if earliest == nil {
			return false
		}
		first = *earliest
		n := 0
		for _, h := range rs.Status.History {
			if h.Workload != "" && h.ScheduledTime.Equal(earliest) {
				n++
			}
		}
		return n == 3
	})
	w.Stop()
	r := <-done

	for _, v := range r.violations {
		t.Error(v)
	}
	if r.maxInProgress != 2 {
		t.Errorf("at most %d rollouts were in progress at once, want 2 (maxConcurrent)", r.maxInProgress)
	}
	if r.firstSlot != formatRFC3339(first) {
		t.Errorf("the first restart seen carries %s, the first recorded run is %s", r.firstSlot, formatRFC3339(first))
	}
	// Every Deployment got the first run's value with one patch, and no
	// value was ever written twice.
	for _, n := range names {
		if len(r.generations[n][r.firstSlot]) != 1 {
			t.Errorf("Deployment %s was patched %d times for the run scheduled at %s, want once", n, len(r.generations[n][r.firstSlot]), r.firstSlot)
		}
		for v, gens := range r.generations[n] {
			if len(gens) != 1 {
				t.Errorf("Deployment %s was patched %d times for the run scheduled at %s", n, len(gens), v)
			}
		}
	}
	results := map[string][]deckhandv1alpha1.RestartResult{}
	for _, h := range rs.Status.History {
		if h.Workload != "" && h.ScheduledTime.Equal(&first) {
			results[h.Workload] = append(results[h.Workload], h.Result)
		}
	}
	for _, n := range names {
		if got := results["Deployment/"+n]; len(got) != 1 || got[0] != deckhandv1alpha1.RestartSucceeded {
			t.Errorf("Deployment/%s in the run scheduled at %s: %v, want one Succeeded", n, formatRFC3339(first), got)
		}
	}
}
