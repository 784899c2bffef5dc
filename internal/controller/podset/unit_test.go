package podset

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
)

func TestSortForDeletion(t *testing.T) {
	cases := map[string]struct {
		pods []*corev1.Pod
		want []string // full order, first deleted first
	}{
		"unscheduled before scheduled": {
			pods: []*corev1.Pod{mkPod("scheduled"), mkPod("unscheduled", unscheduled)},
			want: []string{"unscheduled", "scheduled"},
		},
		"pending before unknown before running": {
			pods: []*corev1.Pod{mkPod("running"), mkPod("unknown", phase(corev1.PodUnknown)), mkPod("pending", phase(corev1.PodPending))},
			want: []string{"pending", "unknown", "running"},
		},
		"not ready before ready": {
			pods: []*corev1.Pod{mkPod("ready"), mkPod("notready", notReady)},
			want: []string{"notready", "ready"},
		},
		"lower deletion cost first": {
			pods: []*corev1.Pod{mkPod("high", cost("100")), mkPod("default"), mkPod("low", cost("-5"))},
			want: []string{"low", "default", "high"},
		},
		"malformed deletion cost counts as zero": {
			pods: []*corev1.Pod{mkPod("bad", cost("abc"), node("n1")), mkPod("neg", cost("-1"), node("n2"))},
			want: []string{"neg", "bad"},
		},
		"readiness beats deletion cost": {
			pods: []*corev1.Pod{mkPod("cheap", cost("-100")), mkPod("notready", notReady, cost("100"))},
			want: []string{"notready", "cheap"},
		},
		"doubled up on a node first": {
			pods: []*corev1.Pod{mkPod("alone", node("n1")), mkPod("pair-1", node("n2"), created(now.Add(-time.Hour))), mkPod("pair-2", node("n2"), created(now.Add(-10*time.Hour)))},
			want: []string{"pair-1", "pair-2", "alone"},
		},
		"ready for less time first (log scale)": {
			pods: []*corev1.Pod{
				mkPod("old", node("n1"), ready(now.Add(-10*time.Hour))),
				mkPod("new", node("n2"), ready(now.Add(-time.Minute))),
			},
			want: []string{"new", "old"},
		},
		"similar ready time ties broken by uid": {
			// 64m and 65m lie in the same log2 bucket of nanoseconds.
			pods: []*corev1.Pod{
				mkPod("b", node("n1"), ready(now.Add(-64*time.Minute))),
				mkPod("a", node("n2"), ready(now.Add(-65*time.Minute))),
			},
			want: []string{"a", "b"},
		},
		"more restarts first": {
			pods: []*corev1.Pod{mkPod("calm", node("n1"), restarts(0)), mkPod("crashy", node("n2"), restarts(5))},
			want: []string{"crashy", "calm"},
		},
		"newer before older": {
			pods: []*corev1.Pod{
				mkPod("older", node("n1"), created(now.Add(-48*time.Hour))),
				mkPod("newer", node("n2"), created(now.Add(-time.Minute))),
			},
			want: []string{"newer", "older"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pods := append([]*corev1.Pod(nil), tc.pods...)
			sortForDeletion(pods, tc.pods, now)
			if got := names(pods); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("order = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSlowStartBatch(t *testing.T) {
	cases := map[string]struct {
		count     int
		failAt    int // 1-based call number that fails; 0 never
		wantCalls int
		wantOK    int
	}{
		"all succeed":            {count: 10, wantCalls: 10, wantOK: 10},
		"zero":                   {count: 0, wantCalls: 0, wantOK: 0},
		"first call fails":       {count: 100, failAt: 1, wantCalls: 1, wantOK: 0},
		"fails in batch of four": {count: 100, failAt: 5, wantCalls: 1 + 2 + 4, wantOK: 6},
		"fails in last batch":    {count: 7, failAt: 7, wantCalls: 7, wantOK: 6},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			ok, err := slowStartBatch(tc.count, 1, func() error {
				if n := calls.Add(1); tc.failAt > 0 && int(n) == tc.failAt {
					return errors.New("quota exceeded")
				}
				return nil
			})
			if int(calls.Load()) != tc.wantCalls || ok != tc.wantOK {
				t.Fatalf("calls=%d ok=%d, want calls=%d ok=%d", calls.Load(), ok, tc.wantCalls, tc.wantOK)
			}
			if (err != nil) != (tc.failAt > 0) {
				t.Fatalf("err = %v", err)
			}
		})
	}
}

func TestSlowStartBatchSizes(t *testing.T) {
	// Batches run 1, 2, 4, 8, ... calls concurrently: with 15 calls the
	// largest concurrency seen is 8.
	var cur, peak atomic.Int32
	_, _ = slowStartBatch(15, 1, func() error {
		n := cur.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		cur.Add(-1)
		return nil
	})
	if peak.Load() > 8 {
		t.Fatalf("peak concurrency %d, want at most 8", peak.Load())
	}
}

func TestRevisionHashing(t *testing.T) {
	base := tmpl("nginx:1")
	cases := map[string]struct {
		other          *corev1.PodTemplateSpec
		sameRevision   bool
		sameInPlaceKey bool
	}{
		"identical":        {other: tmpl("nginx:1"), sameRevision: true, sameInPlaceKey: true},
		"image only":       {other: tmpl("nginx:2"), sameInPlaceKey: true},
		"second image":     {other: tmpl("nginx:1", func(t *corev1.PodTemplateSpec) { t.Spec.Containers[1].Image = "busybox:2" }), sameInPlaceKey: true},
		"env changed":      {other: tmpl("nginx:1", func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "A", Value: "1"}} })},
		"label changed":    {other: tmpl("nginx:1", func(t *corev1.PodTemplateSpec) { t.Labels["v"] = "2" })},
		"image and env":    {other: tmpl("nginx:2", func(t *corev1.PodTemplateSpec) { t.Spec.Containers[0].Args = []string{"-x"} })},
		"init image":       {other: tmpl("nginx:1", func(t *corev1.PodTemplateSpec) { t.Spec.InitContainers = []corev1.Container{{Name: "i", Image: "x"}} })},
		"container rename": {other: tmpl("nginx:1", func(t *corev1.PodTemplateSpec) { t.Spec.Containers[1].Name = "other" })},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Revision(base) == Revision(tc.other); got != tc.sameRevision {
				t.Errorf("same revision = %v, want %v", got, tc.sameRevision)
			}
			if got := InPlaceHash(base) == InPlaceHash(tc.other); got != tc.sameInPlaceKey {
				t.Errorf("same in-place hash = %v, want %v", got, tc.sameInPlaceKey)
			}
		})
	}
	if Revision(base) != Revision(base.DeepCopy()) {
		t.Fatal("revision must be deterministic")
	}
	// Map order must not matter.
	a := tmpl("x", func(t *corev1.PodTemplateSpec) { t.Labels = map[string]string{"a": "1", "b": "2", "c": "3"} })
	b := tmpl("x", func(t *corev1.PodTemplateSpec) { t.Labels = map[string]string{"c": "3", "b": "2", "a": "1"} })
	if Revision(a) != Revision(b) {
		t.Fatal("revision must not depend on map order")
	}
	if InPlaceHash(base) == "" || base.Spec.Containers[0].Image != "nginx:1" {
		t.Fatal("InPlaceHash must not modify its argument")
	}
}

func TestResolveStrategy(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(i int) *intstr.IntOrString { v := intstr.FromInt32(int32(i)); return &v }
	cases := map[string]struct {
		s                deckhandv1alpha1.PodSetUpdateStrategy
		replicas         int
		surge, unavail   int
		rolling, inPlace bool
	}{
		"defaults 25% of 10":    {replicas: 10, surge: 3, unavail: 2, rolling: true, inPlace: true},
		"both round to zero":    {s: deckhandv1alpha1.PodSetUpdateStrategy{MaxSurge: num(0), MaxUnavailable: pct("10%")}, replicas: 5, surge: 0, unavail: 1, rolling: true, inPlace: true},
		"numbers":               {s: deckhandv1alpha1.PodSetUpdateStrategy{MaxSurge: num(0), MaxUnavailable: num(2)}, replicas: 20, surge: 0, unavail: 2, rolling: true, inPlace: true},
		"on delete, no inplace": {s: deckhandv1alpha1.PodSetUpdateStrategy{Type: deckhandv1alpha1.OnDeletePodSetStrategyType, InPlaceIfPossible: ptr.To(false)}, replicas: 4, surge: 1, unavail: 1},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := resolveStrategy(tc.s, tc.replicas)
			if got.maxSurge != tc.surge || got.maxUnavailable != tc.unavail || got.rolling != tc.rolling || got.inPlace != tc.inPlace {
				t.Fatalf("got %+v", got)
			}
		})
	}
}

func TestPlanSync(t *testing.T) {
	rolling := func(surge, unavail, partition int, inPlace bool) strategy {
		return strategy{rolling: true, inPlace: inPlace, maxSurge: surge, maxUnavailable: unavail, partition: partition}
	}
	n := func(prefix string, count int, updated, available, inPlaceOK bool) []podView {
		var out []podView
		for i := range count {
			out = append(out, view(fmt.Sprintf("%s-%02d", prefix, i), updated, available, inPlaceOK,
				created(now.Add(-time.Duration(i+1)*time.Hour))))
		}
		return out
	}
	cat := func(groups ...[]podView) []podView {
		var out []podView
		for _, g := range groups {
			out = append(out, g...)
		}
		return out
	}
	cases := map[string]struct {
		in          planInput
		create      int
		deleteNames []string // exact names (order-insensitive count check when nil and deleteN set)
		deleteN     int
		inPlaceN    int
		rolling     bool
	}{
		"scale up from zero":       {in: planInput{replicas: 50, strategy: rolling(1, 1, 0, true)}, create: 50},
		"scale up capped by burst": {in: planInput{replicas: 2000, strategy: rolling(1, 1, 0, true)}, create: burstReplicas},
		"terminating pods do not block a scale-up": {
			in: planInput{replicas: 3, pods: n("new", 1, true, true, false), terminating: 2, strategy: rolling(0, 1, 0, true)}, create: 2,
		},
		"scale down picks upstream order": {
			in: planInput{replicas: 1, pods: cat(n("new", 1, true, true, false),
				[]podView{view("pending", true, false, false, unscheduled)}), strategy: rolling(0, 1, 0, true)},
			deleteNames: []string{"pending"},
		},
		"steady state": {in: planInput{replicas: 3, pods: n("new", 3, true, true, false), strategy: rolling(1, 1, 0, true)}},
		"on delete never touches old pods": {
			in: planInput{replicas: 3, pods: n("old", 3, false, true, true), strategy: strategy{maxSurge: 1, maxUnavailable: 1}},
		},
		"recreate within maxUnavailable, no surge": {
			in:      planInput{replicas: 20, pods: n("old", 20, false, true, false), strategy: rolling(0, 2, 0, true)},
			deleteN: 2, rolling: true,
		},
		"recreate waits while new pods are unavailable": {
			in: planInput{replicas: 20, pods: cat(n("old", 18, false, true, false), n("new", 2, true, false, false)),
				strategy: rolling(0, 2, 0, true)},
			rolling: true,
		},
		"missing pods are created during a rollout without surge": {
			in:     planInput{replicas: 20, pods: n("old", 18, false, true, false), strategy: rolling(0, 2, 0, true)},
			create: 2, rolling: true,
		},
		"terminating pods count against the rollout total": {
			in:      planInput{replicas: 20, pods: n("old", 18, false, true, false), terminating: 2, strategy: rolling(0, 2, 0, true)},
			rolling: true,
		},
		"surge first when nothing may be unavailable": {
			in:     planInput{replicas: 4, pods: n("old", 4, false, true, false), strategy: rolling(1, 0, 0, true)},
			create: 1, rolling: true,
		},
		"surge pod available: delete one old": {
			in: planInput{replicas: 4, pods: cat(n("old", 4, false, true, false), n("new", 1, true, true, false)),
				strategy: rolling(1, 0, 0, true)},
			deleteN: 1, rolling: true,
		},
		"unavailable old pods are replaced first and for free": {
			in: planInput{replicas: 5, pods: cat(n("old", 3, false, true, false), []podView{
				view("broken-1", false, false, false), view("broken-2", false, false, false)}),
				strategy: rolling(0, 1, 0, true)},
			// available 3, minAvailable 4: no budget, but both broken pods go.
			deleteNames: []string{"broken-1", "broken-2"}, rolling: true,
		},
		"in place within maxUnavailable": {
			in:       planInput{replicas: 20, pods: n("old", 20, false, true, true), strategy: rolling(0, 2, 0, true)},
			inPlaceN: 2, rolling: true,
		},
		"in place needs no surge": {
			in:       planInput{replicas: 4, pods: n("old", 4, false, true, true), strategy: rolling(1, 1, 0, true)},
			inPlaceN: 1, rolling: true,
		},
		"in place on the surge when nothing may be unavailable": {
			in:     planInput{replicas: 2, pods: n("old", 2, false, true, true), strategy: rolling(1, 0, 0, true)},
			create: 1, rolling: true,
		},
		"surge pod available: one old pod in place": {
			in: planInput{replicas: 2, pods: cat(n("old", 2, false, true, true), n("new", 1, true, true, false)),
				strategy: rolling(1, 0, 0, true)},
			inPlaceN: 1, rolling: true,
		},
		"in place disabled recreates": {
			in:      planInput{replicas: 4, pods: n("old", 4, false, true, true), strategy: rolling(0, 1, 0, false)},
			deleteN: 1, rolling: true,
		},
		"partition keeps old pods": {
			in:       planInput{replicas: 5, pods: cat(n("old", 3, false, true, true), n("new", 2, true, true, false)), strategy: rolling(0, 5, 3, true)},
			inPlaceN: 0,
		},
		"partition limits the update": {
			in:       planInput{replicas: 5, pods: n("old", 5, false, true, true), strategy: rolling(0, 5, 3, true)},
			inPlaceN: 2, rolling: true,
		},
		"scale down during a rollout keeps up to maxSurge extra pods": {
			in: planInput{replicas: 2, pods: cat(n("new", 2, true, true, false), n("old", 3, false, true, false)),
				strategy: rolling(1, 1, 0, true)},
			deleteN: 2, rolling: true,
		},
		"scale down during a rollout deletes old pods first": {
			in: planInput{replicas: 2, pods: cat(n("new", 2, true, true, false), n("old", 3, false, true, false)),
				strategy: rolling(0, 1, 0, true)},
			deleteN: 3, rolling: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.in.now = now
			got := planSync(tc.in)
			if got.create != tc.create {
				t.Errorf("create = %d, want %d", got.create, tc.create)
			}
			if tc.deleteNames != nil {
				if fmt.Sprint(names(got.delete)) != fmt.Sprint(tc.deleteNames) {
					t.Errorf("delete = %v, want %v", names(got.delete), tc.deleteNames)
				}
			} else if len(got.delete) != tc.deleteN {
				t.Errorf("delete = %v, want %d pods", names(got.delete), tc.deleteN)
			}
			if len(got.inPlace) != tc.inPlaceN {
				t.Errorf("inPlace = %v, want %d pods", names(got.inPlace), tc.inPlaceN)
			}
			if got.rolling != tc.rolling {
				t.Errorf("rolling = %v, want %v", got.rolling, tc.rolling)
			}
		})
	}
}

func TestPlanScaleDownDuringRolloutTakesOldPods(t *testing.T) {
	in := planInput{replicas: 2, now: now, strategy: strategy{rolling: true, maxUnavailable: 1}}
	in.pods = []podView{
		view("new-a", true, true, false), view("new-b", true, true, false),
		view("old-a", false, true, false), view("old-b", false, true, false),
	}
	got := planSync(in)
	if fmt.Sprint(names(got.delete)) != "[old-a old-b]" && fmt.Sprint(names(got.delete)) != "[old-b old-a]" {
		t.Fatalf("delete = %v, want the two old pods", names(got.delete))
	}
}

// TestPlanSurplusAfterInPlaceSurge: once every old pod is updated in place,
// the pod the surge created goes, not one updated in place, and not before
// the last in-place update is available (maxUnavailable 0).
func TestPlanSurplusAfterInPlaceSurge(t *testing.T) {
	st := strategy{rolling: true, inPlace: true, maxSurge: 1}
	inPlaced := func(name string, updating bool) podView {
		v := view(name, true, !updating, false, ready(now.Add(-time.Minute)))
		v.updatedInPlace, v.updating = true, updating
		return v
	}
	surge := view("surge", true, true, false, ready(now.Add(-2*time.Minute)), created(now.Add(-3*time.Minute)))

	in := planInput{replicas: 2, now: now, strategy: st, pods: []podView{inPlaced("a", false), inPlaced("b", true), surge}}
	if got := planSync(in); len(got.delete) != 0 {
		t.Fatalf("delete = %v while b is being updated in place; want nothing until it is available", names(got.delete))
	}
	in.pods[1] = inPlaced("b", false)
	if got := planSync(in); fmt.Sprint(names(got.delete)) != "[surge]" {
		t.Fatalf("delete = %v, want [surge]", names(got.delete))
	}
}

func TestInPlaceUpdateDone(t *testing.T) {
	const (
		digest1 = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
		digest2 = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
	)
	state := func(rev string, oldIDs map[string]string) string {
		return fmt.Sprintf(`{"revision":%q,"updateTime":"2026-03-01T12:00:00Z","oldImageIDs":{"web":%q}}`, rev, oldIDs["web"])
	}
	pod := func(labelRev, ann, specImage, statusImage, imageID string, isReady bool) *corev1.Pod {
		p := mkPod("p")
		p.Labels = map[string]string{deckhandv1alpha1.PodSetRevisionLabel: labelRev}
		if ann != "" {
			p.Annotations = map[string]string{deckhandv1alpha1.PodSetInPlaceUpdateAnnotation: ann}
		}
		p.Spec.Containers = []corev1.Container{{Name: "web", Image: specImage}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: statusImage, ImageID: imageID}}
		if !isReady {
			notReady(p)
		}
		return p
	}
	cases := map[string]struct {
		pod  *corev1.Pod
		done bool
	}{
		"no update recorded":              {pod: pod("r2", "", "nginx:2", "nginx:1", "", true), done: true},
		"annotation for another revision": {pod: pod("r3", state("r2", nil), "nginx:3", "nginx:1", "", true), done: true},
		"kubelet has not restarted":       {pod: pod("r2", state("r2", nil), "nginx:2", "nginx:1", "", true)},
		"new image reported, ready":       {pod: pod("r2", state("r2", nil), "nginx:2", "docker.io/library/nginx:2", "", true), done: true},
		"new image reported, not ready":   {pod: pod("r2", state("r2", nil), "nginx:2", "nginx:2", "", false)},
		"image id changed":                {pod: pod("r2", state("r2", map[string]string{"web": "sha-1"}), "nginx:2", "nginx@sha256:x", "sha-2", true), done: true},
		"image id unchanged":              {pod: pod("r2", state("r2", map[string]string{"web": "sha-1"}), "nginx:2", "nginx@sha256:x", "sha-1", true)},
		// A spec pinned by digest is done when the runtime reports that
		// digest, whatever form it writes the reference in.
		"digest, containerd status": {pod: pod("r2", state("r2", nil), "nginx@"+digest2, "docker.io/library/nginx@"+digest2, "docker.io/library/nginx@"+digest2, true), done: true},
		"digest, bare imageID":      {pod: pod("r2", state("r2", nil), "nginx@"+digest2, "docker.io/library/nginx:2", digest2, true), done: true},
		"digest, old digest":        {pod: pod("r2", state("r2", nil), "nginx@"+digest2, "docker.io/library/nginx@"+digest1, "docker.io/library/nginx@"+digest1, true)},
		"other registry, same path": {pod: pod("r2", state("r2", nil), "registry.example.com/nginx:2", "docker.io/library/nginx:2", "", true)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := inPlaceUpdateDone(tc.pod); got != tc.done {
				t.Fatalf("inPlaceUpdateDone = %v, want %v", got, tc.done)
			}
		})
	}
}

// TestInPlaceUpdateUnderWay: an in-place update not done yet is waited for
// until the progress deadline after its patch; past it, the pod counts as
// broken (a scale-down takes it first, as any unavailable pod).
func TestInPlaceUpdateUnderWay(t *testing.T) {
	p := mkPod("p")
	p.Labels = map[string]string{deckhandv1alpha1.PodSetRevisionLabel: "r2"}
	p.Annotations = map[string]string{deckhandv1alpha1.PodSetInPlaceUpdateAnnotation: `{"revision":"r2","updateTime":"2026-03-01T12:00:00Z"}`}
	p.Spec.Containers = []corev1.Container{{Name: "web", Image: "nginx:2"}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "web", Image: "nginx:1"}}
	const deadline = 10 * time.Minute
	if !inPlaceUpdateUnderWay(p, now.Add(time.Minute), deadline) {
		t.Error("a minute after the patch, the update should be under way")
	}
	if inPlaceUpdateUnderWay(p, now.Add(deadline), deadline) {
		t.Error("at the progress deadline after the patch, the update should no longer count as under way")
	}
	p.Status.ContainerStatuses[0].Image = "nginx:2"
	if inPlaceUpdateUnderWay(p, now.Add(time.Minute), deadline) {
		t.Error("a pod running its new image and Ready has no update under way")
	}
}

// TestInPlacePatchRecordsOldImageIDs: the patch changes only the containers
// whose image differs from the template and records, for each of them, the
// image ID its status showed, which inPlaceUpdateDone compares against.
func TestInPlacePatchRecordsOldImageIDs(t *testing.T) {
	p := mkPod("p")
	p.Spec.Containers = []corev1.Container{{Name: "web", Image: "nginx:1"}, {Name: "log", Image: "log:1"}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "log", ImageID: "log@sha256:1"}, {Name: "web", ImageID: "nginx@sha256:1"}}
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:2"}, {Name: "log", Image: "log:1"}}}}
	raw, err := inPlacePatch(p, tmpl, "r2", now)
	if err != nil {
		t.Fatal(err)
	}
	var patch struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			Containers []map[string]string `json:"containers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &patch); err != nil {
		t.Fatal(err)
	}
	var st inPlaceUpdateState
	if err := json.Unmarshal([]byte(patch.Metadata.Annotations[deckhandv1alpha1.PodSetInPlaceUpdateAnnotation]), &st); err != nil {
		t.Fatalf("the in-place update annotation: %v", err)
	}
	if st.Revision != "r2" || len(st.OldImageIDs) != 1 || st.OldImageIDs["web"] != "nginx@sha256:1" {
		t.Errorf("recorded %+v, want revision r2 and web's old image ID nginx@sha256:1 only", st)
	}
	if c := patch.Spec.Containers; len(c) != 1 || c[0]["name"] != "web" || c[0]["image"] != "nginx:2" {
		t.Errorf("patched containers %v, want web to nginx:2 only", c)
	}
}

func TestIsPodAvailable(t *testing.T) {
	p := mkPod("p", ready(now.Add(-5*time.Second)))
	if ok, wait := isPodAvailable(p, 10, now); ok || wait != 5*time.Second {
		t.Fatalf("ready 5s of 10: ok=%v wait=%v", ok, wait)
	}
	if ok, _ := isPodAvailable(p, 5, now); !ok {
		t.Fatal("ready 5s of 5 must be available")
	}
	if ok, _ := isPodAvailable(mkPod("q", notReady), 0, now); ok {
		t.Fatal("a not-ready pod is not available")
	}
	// The kubelet turns Ready False some time after the gate closes; the
	// pod is leaving its endpoints from the moment it does.
	gated := mkPod("g", ready(now.Add(-time.Hour)))
	inplacegate.Add(&gated.Spec)
	gated.Status.Conditions = append(gated.Status.Conditions, corev1.PodCondition{Type: inplacegate.ConditionType, Status: corev1.ConditionFalse})
	if ok, _ := isPodAvailable(gated, 0, now); ok {
		t.Fatal("a Ready pod whose in-place update gate is closed is not available")
	}
	gated.Status.Conditions[len(gated.Status.Conditions)-1].Status = corev1.ConditionTrue
	if ok, _ := isPodAvailable(gated, 0, now); !ok {
		t.Fatal("a Ready pod whose in-place update gate is open is available")
	}
}

// TestStatusListsAtMostMaxPodNames: status.podNames names every active pod
// up to the limit, the first ones in sorted order beyond it; replicas
// counts them all.
func TestStatusListsAtMostMaxPodNames(t *testing.T) {
	const limit = deckhandv1alpha1.PodSetStatusMaxPodNames
	for _, n := range []int{0, 1, limit, limit + 1, 2 * limit} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := &scope{ps: &deckhandv1alpha1.PodSet{Spec: deckhandv1alpha1.PodSetSpec{Replicas: ptr.To(int32(n))}}, selector: labels.Everything()}
			for i := range n {
				// Created in reverse order: the status sorts them.
				s.pods = append(s.pods, mkPod(fmt.Sprintf("web-%05d", n-1-i)))
			}
			st, _ := computeStatus(s, now)
			if st.Replicas != int32(n) {
				t.Errorf("replicas = %d, want %d", st.Replicas, n)
			}
			want := min(n, limit)
			if len(st.PodNames) != want || (n == 0) != (st.PodNames == nil) {
				t.Fatalf("%d pod names (nil %t), want %d", len(st.PodNames), st.PodNames == nil, want)
			}
			for i, name := range st.PodNames {
				if name != fmt.Sprintf("web-%05d", i) {
					t.Fatalf("podNames[%d] = %s, want the first names in sorted order", i, name)
				}
			}
		})
	}
}

// TestNewPodListsTheGateOnlyForInPlaceUpdates: the in-place update gate
// costs every new pod a second API write before it is Ready; a PodSet that
// never updates in place leaves it out.
func TestNewPodListsTheGateOnlyForInPlaceUpdates(t *testing.T) {
	for _, tc := range []struct {
		name      string
		inPlace   *bool
		wantGated bool
	}{
		{"inPlaceIfPossible unset (true)", nil, true},
		{"inPlaceIfPossible true", ptr.To(true), true},
		{"inPlaceIfPossible false", ptr.To(false), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := &deckhandv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1"}}
			ps.Spec.UpdateStrategy.InPlaceIfPossible = tc.inPlace
			pod := newPod(ps, "r1", "h1")
			if got := inplacegate.Gated(pod); got != tc.wantGated {
				t.Errorf("gated = %t, want %t (readiness gates %v)", got, tc.wantGated, pod.Spec.ReadinessGates)
			}
			if len(ps.Spec.Template.Spec.ReadinessGates) != 0 {
				t.Errorf("the template changed: %v", ps.Spec.Template.Spec.ReadinessGates)
			}
		})
	}
}
