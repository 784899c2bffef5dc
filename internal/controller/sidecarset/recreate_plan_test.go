package sidecarset

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
			want: want{evict: []string{"b", "a"}}},
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
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := planRollout(rolloutInput{pods: tc.pods, gone: tc.gone, maxUnavailable: tc.maxUnavailable, partition: tc.partition, evict: tc.evict})
			g := want{inPlace: podNames(got.inPlace), evict: podNames(got.evict), resize: podNames(got.resize), unmanaged: podNames(got.unmanaged)}
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
