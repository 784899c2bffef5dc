package sidecarset

import (
	"testing"
)

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
		got := facts{p.injected(), p.atLatest(), p.notUpdatable(), p.needsRecreate(), p.unavailableToRollout()}
		if got != want {
			t.Errorf("stage %d: %+v, want %+v", stage, got, want)
		}
	}
}
