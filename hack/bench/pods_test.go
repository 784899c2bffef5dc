package main

import "testing"

// TestPodTrackerCounts: the counts kept as pods change are those a walk of
// every pod gives, through re-deliveries, readiness lost and deletions.
func TestPodTrackerCounts(t *testing.T) {
	tr := &podTracker{pods: map[string]bool{}}
	walk := func() (total, ready int) {
		for _, r := range tr.pods {
			total++
			if r {
				ready++
			}
		}
		return
	}
	steps := []struct {
		name  string
		ready bool
		del   bool
	}{
		{name: "a"}, {name: "b", ready: true}, {name: "b", ready: true}, {name: "a", ready: true},
		{name: "c", ready: true}, {name: "a"}, {name: "b", del: true}, {name: "b", del: true},
		{name: "c", del: true}, {name: "d", ready: true}, {name: "a", ready: true},
	}
	for i, s := range steps {
		if s.del {
			tr.remove(s.name)
		} else {
			tr.set(s.name, s.ready)
		}
		gotTotal, gotReady := tr.counts()
		wantTotal, wantReady := walk()
		if gotTotal != wantTotal || gotReady != wantReady {
			t.Fatalf("after step %d (%+v): counts() = %d total, %d ready; the pods hold %d, %d", i, s, gotTotal, gotReady, wantTotal, wantReady)
		}
	}
	if total, ready := tr.counts(); total != 2 || ready != 2 {
		t.Fatalf("at the end: %d total, %d ready; want a and d, both ready", total, ready)
	}
}
