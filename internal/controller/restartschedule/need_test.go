package restartschedule

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestPlanNeed(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	pod := func(name string, age time.Duration, ready bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		return p
	}
	terminating := func(p *corev1.Pod) *corev1.Pod {
		t := metav1.NewTime(now)
		p.DeletionTimestamp = &t
		return p
	}
	podAge := []deckhandv1alpha1.RestartNeedTrigger{{PodAge: &deckhandv1alpha1.RestartPodAgeTrigger{MaxAge: metav1.Duration{Duration: 24 * time.Hour}}}}
	action := func(maxConcurrent int32, minAge, cool time.Duration) deckhandv1alpha1.RestartAction {
		return deckhandv1alpha1.RestartAction{Scope: deckhandv1alpha1.RestartScopePod, MaxConcurrent: maxConcurrent,
			MinPodAge: &metav1.Duration{Duration: minAge}, Cooldown: &metav1.Duration{Duration: cool}}
	}
	type want struct {
		evict []string
		// held maps a candidate pod to a fragment of what holds it back.
		held map[string]string
		// order is the candidates' order, worst first ("" = not checked).
		order   string
		recheck time.Duration
	}
	cases := map[string]struct {
		in   needInput
		want want
	}{
		"young pods are no candidates; recheck when the oldest turns maxAge": {
			in:   needInput{workloads: []needWorkload{{key: "Deployment/web", desired: 2, pods: []*corev1.Pod{pod("a", 23*time.Hour, true), pod("b", time.Hour, true)}}}},
			want: want{recheck: time.Hour + time.Millisecond},
		},
		"one pod at a time, the oldest first": {
			in: needInput{workloads: []needWorkload{{key: "Deployment/web", desired: 3, pods: []*corev1.Pod{
				pod("a", 25*time.Hour, true), pod("b", 30*time.Hour, true), pod("c", 26*time.Hour, true)}}}},
			want: want{evict: []string{"b"}, order: "b,c,a", held: map[string]string{"a": "maxConcurrent 1: after the eviction of b", "c": "maxConcurrent 1: after the eviction of b"}},
		},
		"maxConcurrent 2 evicts two": {
			in: needInput{action: action(2, 0, 0), workloads: []needWorkload{{key: "Deployment/web", desired: 3, pods: []*corev1.Pod{
				pod("a", 25*time.Hour, true), pod("b", 30*time.Hour, true), pod("c", 26*time.Hour, true)}}}},
			want: want{evict: []string{"b", "c"}, held: map[string]string{"a": "maxConcurrent 2: after the eviction of b, c"}},
		},
		"a pod not Ready holds the workload": {
			in:   needInput{workloads: []needWorkload{{key: "Deployment/web", desired: 2, pods: []*corev1.Pod{pod("a", 25*time.Hour, true), pod("b", time.Minute, false)}}}},
			want: want{held: map[string]string{"a": "maxConcurrent 1: 1 pod(s) of Deployment/web unavailable"}, recheck: 24*time.Hour - time.Minute + time.Millisecond},
		},
		"a terminating pod holds the workload and is no candidate": {
			in: needInput{workloads: []needWorkload{{key: "Deployment/web", desired: 2, pods: []*corev1.Pod{
				pod("a", 25*time.Hour, true), terminating(pod("b", 26*time.Hour, true)), pod("c", time.Second, true)}}}},
			want: want{order: "a", held: map[string]string{"a": "maxConcurrent 1"}, recheck: 24*time.Hour - time.Second + time.Millisecond},
		},
		"a missing replica holds the workload": {
			in:   needInput{workloads: []needWorkload{{key: "Deployment/web", desired: 3, pods: []*corev1.Pod{pod("a", 25*time.Hour, true), pod("b", 26*time.Hour, true)}}}},
			want: want{held: map[string]string{"a": "maxConcurrent", "b": "maxConcurrent 1: 1 pod(s)"}},
		},
		"an eviction the cache does not show yet holds the workload": {
			in: needInput{evicting: map[string]map[string]bool{"Deployment/web": {"b": true}},
				workloads: []needWorkload{{key: "Deployment/web", desired: 2, pods: []*corev1.Pod{pod("a", 25*time.Hour, true), pod("b", 26*time.Hour, true)}}}},
			want: want{order: "a", held: map[string]string{"a": "maxConcurrent 1: 1 pod(s)"}},
		},
		"workloads are independent": {
			in: needInput{workloads: []needWorkload{
				{key: "Deployment/a", desired: 2, pods: []*corev1.Pod{pod("a1", 25*time.Hour, true), pod("a2", 26*time.Hour, true)}},
				{key: "StatefulSet/b", desired: 1, pods: []*corev1.Pod{pod("b-0", 48*time.Hour, true)}},
			}},
			want: want{evict: []string{"b-0", "a2"}, order: "b-0,a2,a1"},
		},
		"minPodAge holds a pod younger than it": {
			in: needInput{action: action(1, 48*time.Hour, 0), triggers: podAge,
				workloads: []needWorkload{{key: "Deployment/web", desired: 1, pods: []*corev1.Pod{pod("a", 25*time.Hour, true)}}}},
			want: want{held: map[string]string{"a": "minPodAge 48h0m0s: the pod is 25h0m0s old"}, recheck: 23 * time.Hour},
		},
		"cooldown holds the workload": {
			in: needInput{action: action(2, 0, time.Hour), lastTriggered: map[string]time.Time{"Deployment/web": now.Add(-20 * time.Minute)},
				workloads: []needWorkload{{key: "Deployment/web", desired: 2, pods: []*corev1.Pod{pod("a", 25*time.Hour, true), pod("b", 26*time.Hour, true)}}}},
			want: want{held: map[string]string{"a": "cooldown 1h0m0s", "b": "cooldown 1h0m0s"}, recheck: 40 * time.Minute},
		},
		"a cooldown over lets one pod go, and starts again": {
			in: needInput{action: action(2, 0, time.Hour), lastTriggered: map[string]time.Time{"Deployment/web": now.Add(-2 * time.Hour)},
				workloads: []needWorkload{{key: "Deployment/web", desired: 2, pods: []*corev1.Pod{pod("a", 25*time.Hour, true), pod("b", 26*time.Hour, true)}}}},
			want: want{evict: []string{"b"}, held: map[string]string{"a": "cooldown"}, recheck: time.Hour},
		},
		"a closed calendar holds every pod": {
			in: needInput{closed: "Fri 10:00 UTC is outside every maintenance window (22:00-02:00)",
				workloads: []needWorkload{{key: "Deployment/web", desired: 1, pods: []*corev1.Pod{pod("a", 25*time.Hour, true)}}}},
			want: want{held: map[string]string{"a": "outside every maintenance window"}},
		},
		"scope Workload: the worst candidate restarts its workload, the others wait for it, whatever is unavailable": {
			in: needInput{workloadScope: true, workloads: []needWorkload{
				{key: "Deployment/web", desired: 4, pods: []*corev1.Pod{pod("a", 25*time.Hour, true), pod("b", 30*time.Hour, true), pod("c", time.Minute, false)}},
				{key: "StatefulSet/db", desired: 1, pods: []*corev1.Pod{pod("db-0", 26*time.Hour, true)}},
			}},
			want: want{evict: []string{"b", "db-0"}, held: map[string]string{"a": "Deployment/web is restarted for b"}, recheck: 24*time.Hour - time.Minute + time.Millisecond},
		},
		"scope Workload: a run in progress holds every candidate": {
			in: needInput{workloadScope: true, runInProgress: "the run scheduled at 2026-11-27T09:00:00Z is in progress (1 workload(s) restarting or waiting)",
				workloads: []needWorkload{{key: "Deployment/web", desired: 1, pods: []*corev1.Pod{pod("a", 25*time.Hour, true)}}}},
			want: want{held: map[string]string{"a": "the run scheduled at 2026-11-27T09:00:00Z is in progress"}},
		},
		"scope Workload: the workload's cooldown holds it": {
			in: needInput{workloadScope: true, action: action(1, 0, time.Hour), lastTriggered: map[string]time.Time{"Deployment/web": now.Add(-20 * time.Minute)},
				workloads: []needWorkload{{key: "Deployment/web", desired: 1, pods: []*corev1.Pod{pod("a", 25*time.Hour, true)}}}},
			want: want{held: map[string]string{"a": "cooldown 1h0m0s: the workload's last triggered replacement was at 2026-11-27T09:40:00Z"}, recheck: 40 * time.Minute},
		},
		"dryRun holds every pod": {
			in: needInput{dryRun: true, closed: "suspended",
				workloads: []needWorkload{{key: "Deployment/web", desired: 1, pods: []*corev1.Pod{pod("a", 25*time.Hour, true)}}}},
			want: want{held: map[string]string{"a": "dryRun"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := tc.in
			in.now = now
			if in.triggers == nil {
				in.triggers = podAge
			}
			if in.action.MaxConcurrent == 0 {
				in.action = action(1, 10*time.Minute, 0)
			}
			plan := planNeed(in)
			var evicted, order []string
			for _, c := range plan.candidates {
				order = append(order, c.Pod)
				if c.evict {
					evicted = append(evicted, c.Pod)
					if c.HeldBy != "" {
						t.Errorf("%s evicted but held by %q", c.Pod, c.HeldBy)
					}
				}
				if frag, ok := tc.want.held[c.Pod]; ok && (c.evict || !strings.Contains(c.HeldBy, frag)) {
					t.Errorf("%s held by %q, want %q", c.Pod, c.HeldBy, frag)
				}
				if c.Trigger != deckhandv1alpha1.RestartTriggerPodAge || c.Limit != "24h0m0s" || !strings.HasSuffix(c.Value, " old") ||
					!c.Since.Time.Equal(c.pod.CreationTimestamp.Add(24*time.Hour)) {
					t.Errorf("%s: candidate %+v", c.Pod, c.RestartCandidate)
				}
			}
			for p := range tc.want.held {
				if !strings.Contains(","+strings.Join(order, ",")+",", ","+p+",") {
					t.Errorf("%s is not a candidate: %v", p, order)
				}
			}
			if got, want := strings.Join(evicted, ","), strings.Join(tc.want.evict, ","); got != want {
				t.Errorf("evicted %q, want %q", got, want)
			}
			if tc.want.order != "" && strings.Join(order, ",") != tc.want.order {
				t.Errorf("order %v, want %s", order, tc.want.order)
			}
			checkRecheck(t, plan, now, tc.want.recheck)
		})
	}
}

// Memory triggers: above the threshold in the latest sample makes a
// candidate; it is evicted once it has stayed above for `for` (since carried
// from the previous status); missing data acts on nothing and says which.
func TestPlanNeedMemory(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	pod := func(name string, limit string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
		p.Spec.Containers = []corev1.Container{{Name: "app"}, {Name: "sidecar"}}
		if limit != "" {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(limit)}
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		return p
	}
	mi := int64(1 << 20)
	sample := func(age time.Duration, app int64) PodUsage {
		return PodUsage{At: now.Add(-age), Containers: []ContainerUsage{{"app", app}, {"sidecar", 1 * mi}}}
	}
	percent := []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{Container: "app", PercentOfLimit: ptr.To[int32](90),
		For: &metav1.Duration{Duration: 5 * time.Minute}}}}
	above := []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{Above: ptr.To(resource.MustParse("500Mi")),
		For: &metav1.Duration{Duration: 5 * time.Minute}}}}
	query := []deckhandv1alpha1.RestartNeedTrigger{{Query: &deckhandv1alpha1.RestartQueryTrigger{Expr: "DCGM_FI_DEV_FB_USED", Above: resource.MustParse("20000"),
		For: &metav1.Duration{Duration: 5 * time.Minute}}}}
	answer := func(values map[string]float64) map[int]queryAnswer { return map[int]queryAnswer{0: {values: values}} }
	// rise is n samples 10s apart growing perSecond, the latest (last) 10s
	// ago: a line that reaches limit (limit-last)/perSecond - 10s from now.
	rise := func(n int, last, perSecond float64) []point {
		out := make([]point, n)
		for i := range out {
			back := float64(n - 1 - i)
			out[i] = pointAt(now.Add(-10*time.Second-time.Duration(back)*10*time.Second), last-back*10*perSecond)
		}
		return out
	}
	app := func(pod string) seriesKey { return seriesKey{pod: pod, container: "app"} }
	queryLimit := []deckhandv1alpha1.RestartNeedTrigger{{Query: &deckhandv1alpha1.RestartQueryTrigger{Expr: "DCGM_FI_DEV_FB_USED", Above: resource.MustParse("20000"),
		Limit: ptr.To(resource.MustParse("24000")), For: &metav1.Duration{Duration: 5 * time.Minute}}}}
	const outside = "Fri 10:00 UTC is outside every maintenance window (01:00-05:00)"
	type want struct {
		evict   string
		held    map[string]string
		missing map[string]string
		recheck time.Duration
		// predicted is, by pod, how long from now its limit is predicted;
		// urgent lists the pods replaced for spec.urgency.
		predicted map[string]time.Duration
		urgent    string
	}
	cases := map[string]struct {
		triggers       []deckhandv1alpha1.RestartNeedTrigger
		pods           []*corev1.Pod
		usage          map[string]PodUsage
		queried        map[int]queryAnswer
		since          map[string]time.Time
		metricsMissing string
		// series, urgentWithin, closed (by the calendar unless suspended)
		// and nextReopen (from now) are what predictions decide from.
		series       map[seriesKey][]point
		urgentWithin time.Duration
		closed       string
		suspended    bool
		nextReopen   time.Duration
		want         want
	}{
		"below the threshold: no candidate": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi"), pod("b", "1Gi")},
			usage: map[string]PodUsage{"a": sample(10*time.Second, 900*mi), "b": sample(10*time.Second, 100*mi)},
		},
		"first sample above: held for `for`": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi"), pod("b", "1Gi")},
			usage: map[string]PodUsage{"a": sample(10*time.Second, 1000*mi), "b": sample(10*time.Second, 100*mi)},
			want:  want{held: map[string]string{"a": "for 5m0s: above the threshold since 2026-11-27T09:59:50Z"}, recheck: 5*time.Minute - 10*time.Second},
		},
		"above since long enough: evicted": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi"), pod("b", "1Gi")},
			usage: map[string]PodUsage{"a": sample(10*time.Second, 1000*mi), "b": sample(10*time.Second, 100*mi)},
			since: map[string]time.Time{"a/app": now.Add(-6 * time.Minute)},
			want:  want{evict: "a"},
		},
		"a spike: since a later sample than the one above": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi"), pod("b", "1Gi")},
			usage: map[string]PodUsage{"a": sample(10*time.Second, 1000*mi), "b": sample(10*time.Second, 100*mi)},
			// A since after the sample belongs to an earlier run of samples.
			since: map[string]time.Time{"a/app": now},
			want:  want{held: map[string]string{"a": "for 5m0s: above the threshold since 2026-11-27T09:59:50Z"}, recheck: 5*time.Minute - 10*time.Second},
		},
		"the worst of two leaking pods first": {
			triggers: above, pods: []*corev1.Pod{pod("a", ""), pod("b", "")},
			usage: map[string]PodUsage{"a": sample(10*time.Second, 600*mi), "b": sample(10*time.Second, 700*mi)},
			since: map[string]time.Time{"a/app": now.Add(-time.Hour), "b/app": now.Add(-time.Hour)},
			want:  want{evict: "b", held: map[string]string{"a": "maxConcurrent 1: after the eviction of b"}},
		},
		"no limit for a percentage: nothing done, said": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "")},
			usage: map[string]PodUsage{"a": sample(10*time.Second, 1000*mi)},
			since: map[string]time.Time{"a/app": now.Add(-time.Hour)},
			want:  want{missing: map[string]string{ReasonNoMemoryLimit: "a/app has no memory limit"}},
		},
		"a stale sample: nothing done, said": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi")},
			usage: map[string]PodUsage{"a": sample(10*time.Minute, 1000*mi)},
			since: map[string]time.Time{"a/app": now.Add(-time.Hour)},
			want:  want{missing: map[string]string{ReasonStaleMetrics: "a: the latest sample is 10m0s old"}},
		},
		"no sample: nothing done, said": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi")},
			usage: map[string]PodUsage{},
			want:  want{missing: map[string]string{ReasonStaleMetrics: "a has no sample"}},
		},
		"metrics API unavailable: nothing judged": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi")}, metricsMissing: "the server could not find the requested resource",
		},
		"query: at or below the threshold, or absent from the answer: no candidate": {
			triggers: query, pods: []*corev1.Pod{pod("a", ""), pod("b", ""), pod("c", "")},
			queried: answer(map[string]float64{"a": 20000, "b": 100}),
		},
		"query: first answer above: held for `for`": {
			triggers: query, pods: []*corev1.Pod{pod("a", ""), pod("b", "")},
			queried: answer(map[string]float64{"a": 20001, "b": 100}),
			want:    want{held: map[string]string{"a": "for 5m0s: above the threshold since 2026-11-27T10:00:00Z"}, recheck: 5 * time.Minute},
		},
		"query: above since long enough, the worst first": {
			triggers: query, pods: []*corev1.Pod{pod("a", ""), pod("b", "")},
			queried: answer(map[string]float64{"a": 30000, "b": 40000}),
			since:   map[string]time.Time{"a/": now.Add(-time.Hour), "b/": now.Add(-6 * time.Minute)},
			want:    want{evict: "b", held: map[string]string{"a": "maxConcurrent 1: after the eviction of b"}},
		},
		"query: a since in the future starts the count now": {
			triggers: query, pods: []*corev1.Pod{pod("a", "")},
			queried: answer(map[string]float64{"a": 30000}),
			since:   map[string]time.Time{"a/": now.Add(time.Minute)},
			want:    want{held: map[string]string{"a": "for 5m0s"}, recheck: 5 * time.Minute},
		},
		// 1Gi is 1024Mi: 600Mi rising 4Mi/s reaches it 106s after the
		// latest sample, 96s from now.
		"predicted within urgency: evicted outside the windows, its `for` not over, the flat pod not": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi"), pod("b", "1Gi")},
			usage:        map[string]PodUsage{"a": sample(10*time.Second, 600*mi), "b": sample(10*time.Second, 600*mi)},
			series:       map[seriesKey][]point{app("a"): rise(4, float64(600*mi), float64(4*mi)), app("b"): rise(4, float64(600*mi), 0)},
			urgentWithin: 5 * time.Minute, closed: outside,
			want: want{evict: "a", predicted: map[string]time.Duration{"a": 96 * time.Second}, urgent: "a"},
		},
		"predicted beyond urgency, outside the windows: no candidate": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi")},
			usage:        map[string]PodUsage{"a": sample(10*time.Second, 600*mi)},
			series:       map[seriesKey][]point{app("a"): rise(4, float64(600*mi), float64(mi))},
			urgentWithin: 5 * time.Minute, closed: outside,
		},
		"urgency does not override suspend": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi")},
			usage:        map[string]PodUsage{"a": sample(10*time.Second, 600*mi)},
			series:       map[seriesKey][]point{app("a"): rise(4, float64(600*mi), float64(4*mi))},
			urgentWithin: 5 * time.Minute, closed: "suspended (spec.suspend)", suspended: true,
			want: want{held: map[string]string{"a": "suspended"}, predicted: map[string]time.Duration{"a": 96 * time.Second}, urgent: "a"},
		},
		"urgency still replaces one pod at a time, the sooner first": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi"), pod("b", "1Gi")},
			usage:        map[string]PodUsage{"a": sample(10*time.Second, 600*mi), "b": sample(10*time.Second, 800*mi)},
			series:       map[seriesKey][]point{app("a"): rise(4, float64(600*mi), float64(4*mi)), app("b"): rise(4, float64(800*mi), float64(4*mi))},
			urgentWithin: 5 * time.Minute, closed: outside,
			want: want{evict: "b", held: map[string]string{"a": "maxConcurrent 1: after the eviction of b"},
				predicted: map[string]time.Duration{"a": 96 * time.Second, "b": 46 * time.Second}, urgent: "a,b"},
		},
		"too few samples: no prediction": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi")},
			usage:        map[string]PodUsage{"a": sample(10*time.Second, 600*mi)},
			series:       map[seriesKey][]point{app("a"): rise(2, float64(600*mi), float64(4*mi))},
			urgentWithin: 5 * time.Minute, closed: outside,
		},
		"falling: no prediction": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi")},
			usage:        map[string]PodUsage{"a": sample(10*time.Second, 1000*mi)},
			series:       map[seriesKey][]point{app("a"): rise(4, float64(1000*mi), -float64(mi))},
			since:        map[string]time.Time{"a/app": now.Add(-time.Minute)},
			urgentWithin: 5 * time.Minute, closed: outside,
			want: want{held: map[string]string{"a": "for 5m0s"}, recheck: 4 * time.Minute},
		},
		// 600Mi rising 0.1Mi/s reaches 1024Mi in 4230s, before the
		// calendar opens again in 12h.
		"in a window, predicted before the next one opens: replaced now, below the threshold": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi")},
			usage:      map[string]PodUsage{"a": sample(10*time.Second, 600*mi)},
			series:     map[seriesKey][]point{app("a"): rise(4, float64(600*mi), float64(mi)/10)},
			nextReopen: 12 * time.Hour,
			want:       want{evict: "a", predicted: map[string]time.Duration{"a": 4230 * time.Second}},
		},
		// 0.005Mi/s: 84800s, after the next opening.
		"in a window, predicted after the next one opens: left to it": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi")},
			usage:      map[string]PodUsage{"a": sample(10*time.Second, 600*mi)},
			series:     map[seriesKey][]point{app("a"): rise(4, float64(600*mi), float64(mi)/200)},
			nextReopen: 12 * time.Hour,
		},
		"above the threshold and rising: the prediction listed, `for` still holds": {
			triggers: percent, pods: []*corev1.Pod{pod("a", "1Gi")},
			usage:  map[string]PodUsage{"a": sample(10*time.Second, 1000*mi)},
			series: map[seriesKey][]point{app("a"): rise(4, float64(1000*mi), float64(mi))},
			want:   want{held: map[string]string{"a": "for 5m0s"}, recheck: 5*time.Minute - 10*time.Second, predicted: map[string]time.Duration{"a": 14 * time.Second}},
		},
		// 21000 rising 100 a second reaches the limit 24000 20s from now;
		// above alone would hold it for 5m.
		"query: predicted to reach its limit within urgency: evicted": {
			triggers: queryLimit, pods: []*corev1.Pod{pod("a", ""), pod("b", "")},
			queried:      answer(map[string]float64{"a": 21000, "b": 21000}),
			series:       map[seriesKey][]point{{pod: "a"}: rise(4, 21000, 100), {pod: "b"}: rise(4, 21000, 0)},
			urgentWithin: time.Minute, closed: outside,
			want: want{evict: "a", held: map[string]string{"b": "for 5m0s"}, recheck: 5 * time.Minute, predicted: map[string]time.Duration{"a": 20 * time.Second}, urgent: "a"},
		},
		"query failed: nothing judged, said once": {
			triggers: query, pods: []*corev1.Pod{pod("a", ""), pod("b", "")},
			queried: map[int]queryAnswer{0: {failed: "spec.triggers[0].query: connection refused"}},
			since:   map[string]time.Time{"a/": now.Add(-time.Hour)},
			want:    want{missing: map[string]string{ReasonQueryFailed: "spec.triggers[0].query: connection refused"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := needInput{now: now, triggers: tc.triggers, usage: tc.usage, queried: tc.queried, since: tc.since, metricsMissing: tc.metricsMissing, staleAfter: 3 * time.Minute,
				action:    deckhandv1alpha1.RestartAction{MaxConcurrent: 1, MinPodAge: &metav1.Duration{}},
				workloads: []needWorkload{{key: "Deployment/web", desired: len(tc.pods), pods: tc.pods}},
				series:    seriesOf(tc.series), urgentWithin: tc.urgentWithin, closed: tc.closed, calendarClosed: tc.closed != "" && !tc.suspended}
			if tc.nextReopen > 0 {
				in.nextReopen = now.Add(tc.nextReopen)
			}
			plan := planNeed(in)
			var evicted, urgent []string
			for _, c := range plan.candidates {
				if c.evict {
					evicted = append(evicted, c.Pod)
				}
				if c.Urgent {
					urgent = append(urgent, c.Pod)
				}
				want, predicted := tc.want.predicted[c.Pod]
				if got := c.PredictedLimitAt; predicted != (got != nil) || got != nil && (got.Sub(now)-want).Abs() > time.Millisecond {
					t.Errorf("%s predicted to reach its limit at %v, want in %s (predicted %v)", c.Pod, got, want, predicted)
				}
				if (c.Trigger != deckhandv1alpha1.RestartTriggerMemory || c.Container != "app") && (c.Trigger != deckhandv1alpha1.RestartTriggerQuery || c.Container != "") {
					t.Errorf("candidate %+v", c.RestartCandidate)
				}
				if frag, ok := tc.want.held[c.Pod]; ok && (c.evict || !strings.Contains(c.HeldBy, frag)) {
					t.Errorf("%s held by %q, want %q", c.Pod, c.HeldBy, frag)
				}
			}
			if len(plan.candidates) != len(tc.want.held)+len(evicted) {
				t.Errorf("candidates %d, want %d held and %v evicted", len(plan.candidates), len(tc.want.held), evicted)
			}
			if got := strings.Join(evicted, ","); got != tc.want.evict {
				t.Errorf("evicted %q, want %q", got, tc.want.evict)
			}
			slices.Sort(urgent)
			if got := strings.Join(urgent, ","); got != tc.want.urgent {
				t.Errorf("urgent %q, want %q", got, tc.want.urgent)
			}
			if len(plan.missing) != len(tc.want.missing) {
				t.Errorf("missing %v, want %v", plan.missing, tc.want.missing)
			}
			for reason, frag := range tc.want.missing {
				if len(plan.missing[reason]) != 1 || !strings.Contains(plan.missing[reason][0], frag) {
					t.Errorf("missing[%s] = %v, want %q", reason, plan.missing[reason], frag)
				}
			}
			checkRecheck(t, plan, now, tc.want.recheck)
		})
	}
}

// A candidate of action scope Workload queues its workload's restart with
// the trigger, the pod and the value, and the workload's cooldown starts;
// with status.pending full it stays a held candidate.
func TestQueueTriggered(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 500, time.UTC)
	candidate := func() *needCandidate {
		return &needCandidate{pod: &corev1.Pod{}, RestartCandidate: deckhandv1alpha1.RestartCandidate{Pod: "web-1", Workload: "Deployment/web",
			Trigger: deckhandv1alpha1.RestartTriggerMemory, Value: "812Mi", Limit: "90% of 1Gi"}}
	}
	s := &scope{rs: &deckhandv1alpha1.RestartSchedule{}, now: now}
	c := candidate()
	queueTriggered(s, c, &needInput{})
	want := []deckhandv1alpha1.RestartPending{{Kind: "Deployment", Name: "web", ScheduledTime: metav1.NewTime(now.Truncate(time.Second)),
		Trigger: deckhandv1alpha1.RestartTriggerMemory, Pod: "web-1", Value: "812Mi"}}
	if got := s.rs.Status.Pending; len(got) != 1 || !got[0].ScheduledTime.Equal(&want[0].ScheduledTime) || got[0].Kind != "Deployment" || got[0].Name != "web" ||
		got[0].Trigger != want[0].Trigger || got[0].Pod != "web-1" || got[0].Value != "812Mi" {
		t.Fatalf("pending %+v, want %+v", got, want)
	}
	if c.HeldBy != heldRestarting || len(s.rs.Status.LastTriggered) != 1 || len(s.events) != 1 || s.events[0].reason != ReasonRestartTriggered {
		t.Fatalf("heldBy %q, lastTriggered %+v, events %+v", c.HeldBy, s.rs.Status.LastTriggered, s.events)
	}

	full := &scope{rs: &deckhandv1alpha1.RestartSchedule{}, now: now}
	full.rs.Status.Pending = make([]deckhandv1alpha1.RestartPending, maxListedPending)
	c = candidate()
	queueTriggered(full, c, &needInput{})
	if len(full.rs.Status.Pending) != maxListedPending || c.HeldBy != "100 workloads already wait for their restart" || len(full.events) > 0 {
		t.Fatalf("with pending full: %d pending, heldBy %q, events %+v", len(full.rs.Status.Pending), c.HeldBy, full.events)
	}
}

// checkRecheck fails t unless plan asks to be looked at again want after
// now (0: not at all).
func checkRecheck(t *testing.T, plan needPlan, now time.Time, want time.Duration) {
	t.Helper()
	var recheck time.Duration
	if !plan.recheck.IsZero() {
		recheck = plan.recheck.Sub(now)
	}
	if recheck != want {
		t.Errorf("recheck in %s, want %s", recheck, want)
	}
}

// seriesOf is a seriesSet holding the given samples.
func seriesOf(m map[seriesKey][]point) seriesSet {
	out := seriesSet{}
	for k, pts := range m {
		out[k] = series{buf: pts}
	}
	return out
}
