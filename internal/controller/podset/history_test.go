package podset

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestRevisionWithCollisions(t *testing.T) {
	base := tmpl("nginx:1")
	if got, want := RevisionWithCollisions(base, nil), Revision(base); got != want {
		t.Fatalf("no collision count: %s, want Revision's %s (existing pod labels must not change)", got, want)
	}
	if got, want := RevisionWithCollisions(base, ptr.To[int32](0)), Revision(base); got != want {
		t.Fatalf("collision count 0: %s, want Revision's %s", got, want)
	}
	one, two := RevisionWithCollisions(base, ptr.To[int32](1)), RevisionWithCollisions(base, ptr.To[int32](2))
	if one == Revision(base) || two == one || two == Revision(base) {
		t.Fatalf("collision counts 0, 1, 2 give %s, %s, %s; want three different revisions", Revision(base), one, two)
	}
	if RevisionWithCollisions(tmpl("nginx:1"), ptr.To[int32](1)) != one {
		t.Fatal("the same template and count gave another revision")
	}
	if n := RevisionName("web", "abc"); n != "web-abc" {
		t.Fatalf("RevisionName = %s", n)
	}
	long := string(make([]byte, 300))
	if n := RevisionName(long, "abc"); len(n) != 253 {
		t.Fatalf("RevisionName of a long name has %d characters, want 253", len(n))
	}
}

func TestRevisionsToPrune(t *testing.T) {
	revs := func(hashes ...string) []revisionInfo {
		var out []revisionInfo
		for i, h := range hashes {
			out = append(out, revisionInfo{name: "web-" + h, hash: h, number: int64(i + 1)})
		}
		return out
	}
	cases := map[string]struct {
		revs  []revisionInfo
		inUse []string // the hashes some pod runs
		limit int
		want  string
	}{
		"under the limit":                {revs("a", "b", "c"), []string{"c"}, 10, "[]"},
		"oldest idle go first":           {revs("a", "b", "c", "d"), []string{"d"}, 1, "[a b]"},
		"limit zero keeps only in use":   {revs("a", "b", "c", "d"), []string{"b", "d"}, 0, "[a c]"},
		"in use is never pruned":         {revs("a", "b", "c"), []string{"a", "b", "c"}, 0, "[]"},
		"old revision a pod runs stays":  {revs("a", "b", "c", "d", "e"), []string{"a", "e"}, 2, "[b]"},
		"nothing to prune without revs":  {nil, []string{"a"}, 0, "[]"},
		"exactly at the limit keeps all": {revs("a", "b", "c"), []string{"c"}, 2, "[]"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			inUse := map[string]bool{}
			for _, h := range tc.inUse {
				inUse[h] = true
			}
			var got []string
			for _, r := range revisionsToPrune(tc.revs, inUse, tc.limit) {
				got = append(got, r.hash)
			}
			if fmt.Sprint(got) != tc.want && !(tc.want == "[]" && got == nil) {
				t.Fatalf("pruned %v, want %s", got, tc.want)
			}
		})
	}
}

func TestResolveRollback(t *testing.T) {
	v1, v2, v3 := tmpl("nginx:1"), tmpl("nginx:2"), tmpl("nginx:3")
	revs := []revisionInfo{
		{name: "web-h1", hash: "h1", number: 1, template: v1},
		{name: "web-h2", hash: "h2", number: 2, template: v2},
		{name: "web-h3", hash: "h3", number: 3, template: v3},
		{name: "web-bad", hash: "bad", number: 4, template: nil},
	}
	cases := map[string]struct {
		value   string
		current *corev1.PodTemplateSpec
		want    string // name, "" for none
	}{
		"previous of the newest":                 {"previous", v3, "web-h2"},
		"previous after a revert to v1 is v3":    {"previous", v1, "web-h3"},
		"previous skips the current template":    {"previous", v2, "web-h3"},
		"by number":                              {"1", v3, "web-h1"},
		"by ControllerRevision name":             {"web-h2", v3, "web-h2"},
		"by revision hash":                       {"h1", v3, "web-h1"},
		"unknown number":                         {"9", v3, ""},
		"unknown name":                           {"web-nope", v3, ""},
		"undecodable revision is never a target": {"4", v3, ""},
		"previous with one revision only":        {"previous", v1, "web-h3"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := resolveRollback(tc.value, revs, tc.current)
			gotName := ""
			if got != nil {
				gotName = got.name
			}
			if gotName != tc.want {
				t.Fatalf("resolveRollback(%q) = %q, want %q", tc.value, gotName, tc.want)
			}
		})
	}
	if got := resolveRollback("previous", revs[:1], v1); got != nil {
		t.Fatalf("previous with only the current revision = %s, want none", got.name)
	}
}

func TestRollbackPatch(t *testing.T) {
	b, err := rollbackPatch("2", tmpl("nginx:2"))
	if err != nil {
		t.Fatal(err)
	}
	var ops []map[string]any
	if err := json.Unmarshal(b, &ops); err != nil {
		t.Fatal(err)
	}
	// The test op must come first: it makes the whole patch conditional on
	// the annotation the controller resolved.
	if len(ops) != 3 || ops[0]["op"] != "test" || ops[0]["value"] != "2" || ops[1]["op"] != "remove" ||
		ops[0]["path"] != "/metadata/annotations/apps.deckhand.dev~1rollback-to" || ops[2]["path"] != "/spec/template" {
		t.Fatalf("patch %s", b)
	}
	b, _ = rollbackPatch("9", nil)
	if err := json.Unmarshal(b, &ops); err != nil || len(ops) != 2 {
		t.Fatalf("patch without a template %s: want test and remove only", b)
	}
}

func TestTrackProgress(t *testing.T) {
	const deadline = 10 * time.Minute
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }
	status := func(replicas, updated, ready, available int32, progress *metav1.Time) deckhandv1alpha1.PodSetStatus {
		return deckhandv1alpha1.PodSetStatus{Replicas: replicas, UpdatedReplicas: updated, ReadyReplicas: ready,
			AvailableReplicas: available, UpdateRevision: "r2", ObservedGeneration: 2, LastProgressTime: progress}
	}
	cases := map[string]struct {
		prev, next   deckhandv1alpha1.PodSetStatus
		inProgress   bool
		timedOut     bool
		progressAt   *metav1.Time // the LastProgressTime written
		wantUntilDue time.Duration
	}{
		"complete clears the clock": {prev: status(3, 3, 3, 3, at(time.Hour)), next: status(3, 3, 3, 3, nil),
			inProgress: false, progressAt: nil},
		"a paused (not in progress) PodSet never times out": {prev: status(3, 1, 3, 3, at(time.Hour)), next: status(3, 1, 3, 3, nil),
			inProgress: false, progressAt: nil},
		"a rollout starts the clock": {prev: status(3, 3, 3, 3, nil), next: status(3, 0, 3, 3, nil),
			inProgress: true, progressAt: at(0), wantUntilDue: deadline},
		"an update counts as progress": {prev: status(3, 1, 3, 3, at(9*time.Minute)), next: status(3, 2, 2, 2, nil),
			inProgress: true, progressAt: at(0), wantUntilDue: deadline},
		"a pod becoming available counts": {prev: status(3, 2, 2, 2, at(9*time.Minute)), next: status(3, 2, 2, 3, nil),
			inProgress: true, progressAt: at(0), wantUntilDue: deadline},
		"no progress within the deadline waits for it": {prev: status(3, 1, 2, 2, at(4*time.Minute)), next: status(3, 1, 2, 2, nil),
			inProgress: true, progressAt: at(4 * time.Minute), wantUntilDue: 6 * time.Minute},
		"no progress past the deadline times out": {prev: status(3, 1, 2, 2, at(11*time.Minute)), next: status(3, 1, 2, 2, nil),
			inProgress: true, timedOut: true, progressAt: at(11 * time.Minute)},
		"exactly at the deadline times out": {prev: status(3, 1, 2, 2, at(deadline)), next: status(3, 1, 2, 2, nil),
			inProgress: true, timedOut: true, progressAt: at(deadline)},
		"losing availability is not progress": {prev: status(3, 1, 3, 3, at(11*time.Minute)), next: status(3, 1, 2, 2, nil),
			inProgress: true, timedOut: true, progressAt: at(11 * time.Minute)},
		"scaling nearer spec.replicas counts": {prev: status(1, 1, 1, 1, at(11*time.Minute)), next: status(2, 2, 1, 1, nil),
			inProgress: true, progressAt: at(0), wantUntilDue: deadline},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			next := tc.next
			timedOut, until := trackProgress(&tc.prev, &next, 2, 3, tc.inProgress, deadline, now)
			if timedOut != tc.timedOut {
				t.Errorf("timedOut = %v, want %v", timedOut, tc.timedOut)
			}
			if until != tc.wantUntilDue {
				t.Errorf("until the deadline = %v, want %v", until, tc.wantUntilDue)
			}
			if (next.LastProgressTime == nil) != (tc.progressAt == nil) ||
				(next.LastProgressTime != nil && !next.LastProgressTime.Equal(tc.progressAt)) {
				t.Errorf("lastProgressTime = %v, want %v", next.LastProgressTime, tc.progressAt)
			}
		})
	}
	// A new generation (e.g. a resume, a scale) restarts the clock.
	prev := status(3, 1, 2, 2, at(time.Hour))
	next := status(3, 1, 2, 2, nil)
	if timedOut, _ := trackProgress(&prev, &next, 3, 3, true, deadline, now); timedOut || !next.LastProgressTime.Equal(at(0)) {
		t.Fatalf("a new generation: timedOut %v, lastProgressTime %v; want the clock restarted", timedOut, next.LastProgressTime)
	}
}

func TestPlanEvicts(t *testing.T) {
	in := planInput{replicas: 3, now: now, strategy: strategy{rolling: true, maxUnavailable: 2, evict: true}}
	in.pods = []podView{view("old-a", false, true, false), view("old-b", false, true, false), view("old-c", false, true, true)}
	got := planSync(in)
	if len(got.delete) != 0 || len(got.evict) != 2 {
		t.Fatalf("delete %v, evict %v; want two old pods evicted (maxUnavailable 2), none deleted", names(got.delete), names(got.evict))
	}
	// In-place updates are not evictions.
	in.strategy.inPlace = true
	in.strategy.maxUnavailable = 3
	got = planSync(in)
	if len(got.inPlace) != 1 || len(got.evict) != 2 {
		t.Fatalf("inPlace %v, evict %v; want old-c in place, the others evicted", names(got.inPlace), names(got.evict))
	}
	// A scale-down during a rollout deletes, as a ReplicaSet would.
	in.replicas = 1
	got = planSync(in)
	if len(got.evict) != 0 || len(got.delete) != 2 {
		t.Fatalf("scale-down: delete %v, evict %v; want two deleted", names(got.delete), names(got.evict))
	}
	if s := resolveStrategy(deckhandv1alpha1.PodSetUpdateStrategy{PodReplacement: deckhandv1alpha1.EvictPodSetPodReplacement}, 3); !s.evict {
		t.Fatal("podReplacement Evict did not resolve to evict")
	}
	if s := resolveStrategy(deckhandv1alpha1.PodSetUpdateStrategy{}, 3); s.evict {
		t.Fatal("the default podReplacement evicts")
	}
}
