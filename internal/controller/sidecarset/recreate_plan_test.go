package sidecarset

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// TestPlanRollout pins the decisions of a rollout that may recreate pods:
// which pods are updated in place, evicted, resized again or reported, within
// maxUnavailable (pods terminating or evicted and not yet replaced count),
// partition and the update selector.
func TestPlanRollout(t *testing.T) {
	p := podWith // the flags are podWith's
	type want struct{ inPlace, evict, resize, unmanaged []string }
	cases := map[string]struct {
		pods           []*podState
		gone           int
		maxUnavailable int
		partition      int
		evict          bool
		want           want
	}{
		"never: not upgradable left alone": {pods: []*podState{p("a", "rx"), p("b", "n"), p("c", "r")}, maxUnavailable: 1,
			want: want{inPlace: []string{"c"}}},
		"evict: one at a time": {pods: []*podState{p("a", "rx"), p("b", "rx"), p("c", "rx")}, maxUnavailable: 1, evict: true,
			want: want{evict: []string{"a"}}},
		"evict: a pod gone and not replaced uses the budget": {pods: []*podState{p("b", "rx"), p("c", "rx")}, gone: 1, maxUnavailable: 1, evict: true},
		"evict: a pod gone, budget of two": {pods: []*podState{p("b", "rx"), p("c", "rx")}, gone: 1, maxUnavailable: 2, evict: true,
			want: want{evict: []string{"b"}}},
		"evict: the unready replacement uses the budget": {pods: []*podState{p("a", "cu"), p("b", "rx"), p("c", "rx")}, maxUnavailable: 1, evict: true},
		"evict: not injected pods are recreated": {pods: []*podState{p("a", "rn"), p("b", "rcu")}, maxUnavailable: 1, evict: true,
			want: want{evict: []string{"a"}}},
		"evict: a name clash is never recreated":     {pods: []*podState{p("a", "rk"), p("b", "rcu")}, maxUnavailable: 1, evict: true},
		"evict: an opted-out pod is never recreated": {pods: []*podState{func() *podState { s := p("a", "rn"); s.stage = stageOptedOut; return s }(), p("b", "rcu")}, maxUnavailable: 1, evict: true},
		"evict: no controller, reported": {pods: []*podState{p("a", "rxo"), p("b", "rx")}, maxUnavailable: 1, evict: true,
			want: want{evict: []string{"b"}, unmanaged: []string{"a"}}},
		"evict: in place and evictions share the budget": {pods: []*podState{p("a", "r"), p("b", "rx"), p("c", "rx")}, maxUnavailable: 2, evict: true,
			want: want{inPlace: []string{"a"}, evict: []string{"b"}}},
		"evict: not ready first and free": {pods: []*podState{p("a", "rx"), p("b", "x")}, maxUnavailable: 1, evict: true,
			want: want{evict: []string{"b"}}},
		"evict: partition": {pods: []*podState{p("a", "rx"), p("b", "rx"), p("c", "rx")}, maxUnavailable: 3, partition: 2, evict: true,
			want: want{evict: []string{"a"}}},
		"evict: selector": {pods: []*podState{p("a", "rxs"), p("b", "rx")}, maxUnavailable: 2, evict: true,
			want: want{evict: []string{"b"}}},
		"evict: pending waits": {pods: []*podState{p("a", "rxp"), p("b", "rx")}, maxUnavailable: 1, evict: true},
		"resize through the budget": {pods: []*podState{p("a", "rz"), p("b", "rz")}, maxUnavailable: 1,
			want: want{inPlace: []string{"a"}}},
		"resize due again, free": {pods: []*podState{p("a", "rcd"), p("b", "r")}, maxUnavailable: 1,
			want: want{resize: []string{"a"}}},
		"failed resize, never": {pods: []*podState{p("a", "rcf")}, maxUnavailable: 1},
		"failed resize, evict": {pods: []*podState{p("a", "rcf"), p("b", "rx")}, maxUnavailable: 1, evict: true,
			want: want{evict: []string{"a"}}},
		"failed resize, evict, no controller": {pods: []*podState{p("a", "rcfo")}, maxUnavailable: 1, evict: true,
			want: want{unmanaged: []string{"a"}}},
	}
	names := func(ps []*podState) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.pod.Name)
		}
		return out
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := planRollout(rolloutInput{pods: tc.pods, gone: tc.gone, maxUnavailable: tc.maxUnavailable, partition: tc.partition, evict: tc.evict})
			g := want{inPlace: names(got.inPlace), evict: names(got.evict), resize: names(got.resize), unmanaged: names(got.unmanaged)}
			if !reflect.DeepEqual(g, tc.want) {
				t.Errorf("planRollout = %+v, want %+v", g, tc.want)
			}
		})
	}
}

// TestRecreateStateObserve pins how evicted pods count against
// maxUnavailable until their controller replaces them.
func TestRecreateStateObserve(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	owner := types.UID("rs-1")
	pod := func(uid string, terminating bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, Namespace: "ns",
			OwnerReferences: []metav1.OwnerReference{{UID: owner, Kind: "ReplicaSet", Name: "rs", Controller: func() *bool { b := true; return &b }()}}}}
		if terminating {
			p.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return p
	}
	a, b, c := pod("a", false), pod("b", false), pod("c", false)
	rs := newRecreateState()
	rs.evictionStarted(a, []*podState{{pod: a}, {pod: b}, {pod: c}}, now)

	check := func(what string, obs observation, evicting, gone int, lagging bool) {
		t.Helper()
		if obs.evicting != evicting || obs.gone != gone || obs.lagging["a"] != lagging {
			t.Errorf("%s: observation %+v, want evicting %d gone %d lagging %v", what, obs, evicting, gone, lagging)
		}
	}
	check("cache still shows it active", rs.observe([]*corev1.Pod{a, b, c}, nil, now), 1, 0, true)
	check("terminating", rs.observe([]*corev1.Pod{b, c}, []*corev1.Pod{pod("a", true)}, now), 1, 1, false)
	check("gone, not replaced", rs.observe([]*corev1.Pod{b, c}, nil, now), 1, 1, false)
	check("terminating with its replacement", rs.observe([]*corev1.Pod{b, c, pod("d", false)}, []*corev1.Pod{pod("a", true)}, now), 1, 1, false)
	check("gone and replaced", rs.observe([]*corev1.Pod{b, c, pod("d", false)}, nil, now), 0, 0, false)

	rs.evictionStarted(b, []*podState{{pod: b}, {pod: c}}, now)
	check("gone past the timeout", rs.observe([]*corev1.Pod{c}, nil, now.Add(evictionReplaceTimeout+time.Second)), 0, 0, false)

	// A terminating pod nobody remembers (a restarted manager) still counts.
	fresh := newRecreateState()
	if obs := fresh.observe([]*corev1.Pod{b}, []*corev1.Pod{pod("x", true)}, now); obs.gone != 1 {
		t.Errorf("a terminating pod after a restart: gone %d, want 1", obs.gone)
	}
}

// TestClassifyResize pins the resize fallback rule: a resize reached through
// the resize annotation is in progress until the kubelet reports the new
// resources; Infeasible fails at once, Deferred after deferredTimeout
// (counted from the condition's lastTransitionTime), a refused resize at
// once.
func TestClassifyResize(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	s := &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: deckhandv1alpha1.SidecarSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}},
		Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "proxy:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}}}},
	}}
	c := sidecarcontrol.NewLister(toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers()), nil, sidecarcontrol.Options{}).Compiled(s)
	pod := func(specCPU, statusCPU string, conds ...corev1.PodCondition) *corev1.Pod {
		rec := sidecarcontrol.PodRecord{}
		rec.Set("s", c.Hash, c.HashWithoutImage, []string{"proxy"})
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "proxy", Image: "proxy:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(specCPU)}}}}},
			Status: corev1.PodStatus{
				Conditions: append([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}, conds...),
				ContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", Image: "proxy:1", Ready: true,
					Resources: &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(statusCPU)}}}},
			},
		}
		rec.Apply(p)
		withResizeAnnotation(p, "s", c.Hash)
		return p
	}
	pending := func(reason string, since time.Duration) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(now.Add(-since))}
	}
	cases := map[string]struct {
		pod                         *corev1.Pod
		refused                     bool
		due, resizing, failed, done bool
	}{
		"done":                     {pod: pod("200m", "200m"), done: true},
		"kubelet not caught up":    {pod: pod("200m", "100m"), resizing: true},
		"in progress":              {pod: pod("200m", "100m", corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}), resizing: true},
		"request still to make":    {pod: pod("100m", "100m"), due: true, resizing: true},
		"infeasible":               {pod: pod("200m", "100m", pending(corev1.PodReasonInfeasible, 0)), resizing: true, failed: true},
		"deferred, within":         {pod: pod("200m", "100m", pending(corev1.PodReasonDeferred, time.Minute)), resizing: true},
		"deferred, too long":       {pod: pod("200m", "100m", pending(corev1.PodReasonDeferred, 2*time.Minute)), resizing: true, failed: true},
		"refused, request to make": {pod: pod("100m", "100m"), refused: true, due: true, resizing: true, failed: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			refused := map[string]bool{}
			if tc.refused {
				refused[resizeKey(tc.pod, c.Hash)] = true
			}
			st := &podState{}
			classify(classifyInput{set: s, compiled: c, now: now, deferredTimeout: 2 * time.Minute, resizeRefused: refused}, tc.pod, st)
			due, failed, done := st.resize == resizeDue, st.stage == stageResizeFailed, st.stage == stageUpdated
			if !st.atLatest() || st.resize == resizeNone || due != tc.due || st.resizing() != tc.resizing || failed != tc.failed || done != tc.done {
				t.Errorf("podState: stage %d resize %d: due %v resizing %v failed %v updated %v; want due %v resizing %v failed %v updated %v",
					st.stage, st.resize, due, st.resizing(), failed, done, tc.due, tc.resizing, tc.failed, tc.done)
			}
		})
	}
}
