package eviction_test

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/deckhand-dev/deckhand/internal/eviction"
)

func TestPodsSweep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		maxAge time.Duration
		now    time.Time
		// done are the pods the caller finds done.
		done []types.UID
		// asked are the pods done is asked about; kept those left.
		asked, kept []types.UID
	}{
		{name: "none done", now: t0, asked: []types.UID{"a", "b"}, kept: []types.UID{"a", "b"}},
		{name: "one done", now: t0, done: []types.UID{"a"}, asked: []types.UID{"a", "b"}, kept: []types.UID{"b"}},
		{name: "no bound", now: t0.Add(24 * time.Hour), asked: []types.UID{"a", "b"}, kept: []types.UID{"a", "b"}},
		{name: "at the bound", maxAge: time.Minute, now: t0.Add(time.Minute), asked: []types.UID{"a", "b"}, kept: []types.UID{"a", "b"}},
		{name: "past the bound: forgotten unasked", maxAge: time.Minute, now: t0.Add(time.Minute + time.Second), asked: []types.UID{"b"}, kept: []types.UID{"b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := eviction.Pods[string]{
				"a": {At: t0, Info: "a"},
				"b": {At: t0.Add(time.Minute), Info: "b"},
			}
			var asked []types.UID
			pods.Sweep(tc.now, tc.maxAge, func(pod types.UID, r eviction.Record[string]) bool {
				if string(pod) != r.Info {
					t.Errorf("done asked about %s with the record of %s", pod, r.Info)
				}
				asked = append(asked, pod)
				return slices.Contains(tc.done, pod)
			})
			slices.Sort(asked)
			if !slices.Equal(asked, tc.asked) {
				t.Errorf("done asked about %v, want %v", asked, tc.asked)
			}
			var kept []types.UID
			for uid := range pods {
				kept = append(kept, uid)
			}
			slices.Sort(kept)
			if !slices.Equal(kept, tc.kept) {
				t.Errorf("kept %v, want %v", kept, tc.kept)
			}
		})
	}
}

// TestInFlight checks that owners' records are apart and that a sweep
// returns what it keeps, under the store's MaxAge.
func TestInFlight(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := &eviction.InFlight[string]{MaxAge: time.Minute}
	f.Add("schedule-1", "a", t0, "web-a")
	f.Add("schedule-1", "b", t0, "web-b")
	f.Add("schedule-2", "a", t0, "db-a")

	infos := func(rs []eviction.Record[string]) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Info)
		}
		slices.Sort(out)
		return out
	}
	doneIf := func(done types.UID) func(types.UID, eviction.Record[string]) bool {
		return func(pod types.UID, _ eviction.Record[string]) bool { return pod == done }
	}
	if got := infos(f.Sweep("schedule-1", t0, doneIf("a"))); !slices.Equal(got, []string{"web-b"}) {
		t.Errorf("schedule-1 after pod a is done: %v, want [web-b]", got)
	}
	if got := infos(f.Sweep("schedule-2", t0, doneIf(""))); !slices.Equal(got, []string{"db-a"}) {
		t.Errorf("schedule-2: %v, want [db-a]: another owner's pod a is not its", got)
	}
	if got := f.Sweep("schedule-1", t0.Add(2*time.Minute), doneIf("")); len(got) != 0 {
		t.Errorf("schedule-1 past MaxAge: %v, want none", infos(got))
	}
	if got := f.Sweep("unknown", t0, doneIf("")); len(got) != 0 {
		t.Errorf("an unknown owner: %v, want none", infos(got))
	}
}
