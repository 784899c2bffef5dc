package sidecarset

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podWith builds the podState of a pod called name from flags: r ready, c
// on the latest revision, u updated, p with an update pending, x not
// upgradable in place, z upgradable through a resize, s out of the update
// selector's scope, n not injected, k not injected because of a container
// name clash, o without a controller owner, d resize due, f resize failed.
// Without a flag, the opposite: an injected, controlled pod in scope, behind
// the latest revision in images only.
func podWith(name, flags string) *podState {
	has := func(flag rune) bool { return strings.ContainsRune(flags, flag) }
	st := &podState{
		pod:   &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}},
		ready: has('r'), inScope: !has('s'), pending: has('p'), controlled: !has('o'),
	}
	switch {
	case has('k'):
		st.stage, st.clash = stageNameClash, "proxy"
	case has('n'):
		st.stage = stageNotInjected
	case has('c') && has('f'):
		st.stage, st.resize = stageResizeFailed, resizeWaiting
	case has('c') && has('u'):
		st.stage = stageUpdated
	case has('c'):
		st.stage = stageRollingOut
	case has('x'):
		st.stage = stageSpecBehind
	case has('z'):
		st.stage = stageResourcesBehind
	default:
		st.stage = stageImagesBehind
	}
	if has('d') {
		st.resize = resizeDue
	}
	return st
}

// TestPodStage pins what each stage means to the planner and the status.
func TestPodStage(t *testing.T) {
	type facts struct{ injected, atLatest, notUpdatable, needsRecreate, unavailableWhenReady bool }
	cases := map[podStage]facts{
		stageNotInjected:     {needsRecreate: true},
		stageNameClash:       {},
		stageOptedOut:        {},
		stageImagesBehind:    {injected: true},
		stageResourcesBehind: {injected: true},
		stageSpecBehind:      {injected: true, notUpdatable: true, needsRecreate: true},
		stageRollingOut:      {injected: true, atLatest: true, unavailableWhenReady: true},
		stageResizeFailed:    {injected: true, atLatest: true, notUpdatable: true, needsRecreate: true, unavailableWhenReady: true},
		stageUpdated:         {injected: true, atLatest: true},
	}
	for stage, want := range cases {
		p := &podState{stage: stage, ready: true}
		got := facts{p.injected(), p.atLatest(), p.notUpdatable(), p.needsRecreate(), p.unavailable()}
		if got != want {
			t.Errorf("stage %d: %+v, want %+v", stage, got, want)
		}
	}
}
