package podset_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	"github.com/deckhand-dev/deckhand/test/health"
)

// settle waits until the watch sees exactly n pods, all available (the
// surge pod gone, not only from the controller's view), and stops it.
func (bw *budgetWatch) settle(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, time.Minute, func(context.Context) (bool, error) {
		bw.mu.Lock()
		defer bw.mu.Unlock()
		return bw.total == n && bw.available == n, nil
	}, "the pod watch sees %d pods, all available", n)
	bw.stop()
}

// podUIDs maps the names of pods to their UIDs.
func podUIDs(pods []corev1.Pod) map[string]types.UID {
	out := make(map[string]types.UID, len(pods))
	for _, p := range pods {
		out[p.Name] = p.UID
	}
	return out
}

func runningSpecImages(p *corev1.Pod) bool {
	status := map[string]string{}
	for _, cs := range p.Status.ContainerStatuses {
		status[cs.Name] = cs.Image
	}
	for _, c := range p.Spec.Containers {
		if status[c.Name] != c.Image {
			return false
		}
	}
	return true
}

// budgetWatch follows the pods of a namespace from a watch and keeps the
// extremes a rollout reached, counting as Deployments do: pods are the
// pods not being deleted, available ones are those among them that are
// Ready and run the images their spec asks for (a pod whose images were
// just patched is about to restart). It also keeps the most pods at once
// with terminating ones included.
//
// For a failure to explain itself it keeps a timeline of the changes a
// rollout is judged by (podLine) and, at the moment the fewest pods were
// available, that timeline and every pod's state.
type budgetWatch struct {
	mu           sync.Mutex
	pods         map[types.UID]*corev1.Pod
	maxActive    int
	maxTotal     int
	minAvailable int
	active       int
	available    int
	total        int
	stop         func()
	start        time.Time
	lines        map[types.UID]string
	timeline     []string
	// worst is the timeline and the pods' states when the fewest pods
	// were available.
	worst []string
}

// timelineLength is how many of the latest changes the timeline keeps.
const timelineLength = 120

func watchBudgets(t *testing.T, ns string) *budgetWatch {
	t.Helper()
	bw := &budgetWatch{pods: map[types.UID]*corev1.Pod{}, minAvailable: 1 << 30, start: time.Now(), lines: map[types.UID]string{}}
	seed := func(p *corev1.Pod) { bw.pods[p.UID] = p }
	bw.stop = testutil.WatchPods(t, env.Clientset, ns, seed, func(ev watch.EventType, p *corev1.Pod) {
		bw.mu.Lock()
		defer bw.mu.Unlock()
		if ev == watch.Deleted {
			delete(bw.pods, p.UID)
		} else {
			bw.pods[p.UID] = p
		}
		bw.record(ev, p)
		bw.observe()
	})
	bw.mu.Lock()
	bw.observe()
	bw.mu.Unlock()
	return bw
}

func (bw *budgetWatch) observe() {
	bw.active, bw.available, bw.total = 0, 0, len(bw.pods)
	for _, q := range bw.pods {
		if q.DeletionTimestamp != nil {
			continue
		}
		bw.active++
		if podutil.IsPodReady(q) && runningSpecImages(q) {
			bw.available++
		}
	}
	bw.maxActive = max(bw.maxActive, bw.active)
	bw.maxTotal = max(bw.maxTotal, bw.total)
	if bw.available < bw.minAvailable {
		bw.worst = append(slices.Clone(bw.timeline), fmt.Sprintf("%d of %d pods available; each pod:", bw.available, bw.active))
		for _, name := range slices.Sorted(maps.Keys(bw.byName())) {
			bw.worst = append(bw.worst, "  "+podLine(bw.byName()[name]))
		}
	}
	bw.minAvailable = min(bw.minAvailable, bw.available)
}

func (bw *budgetWatch) byName() map[string]*corev1.Pod {
	out := make(map[string]*corev1.Pod, len(bw.pods))
	for _, p := range bw.pods {
		out[p.Name] = p
	}
	return out
}

// record adds to the timeline an event that changed what podLine shows of
// its pod, stamped with when the watch saw it.
func (bw *budgetWatch) record(ev watch.EventType, p *corev1.Pod) {
	line := podLine(p)
	if ev != watch.Deleted && bw.lines[p.UID] == line {
		return
	}
	bw.lines[p.UID] = line
	bw.timeline = append(bw.timeline, fmt.Sprintf("+%6dms %-8s %s", time.Since(bw.start).Milliseconds(), ev, line))
	if len(bw.timeline) > timelineLength {
		bw.timeline = bw.timeline[len(bw.timeline)-timelineLength:]
	}
}

// podLine is what a rollout's budget is judged by, of one pod: its
// in-place update gate, its Ready condition (each with status, reason and
// lastTransitionTime), the images its spec asks for and those its status
// reports, and whether it is being deleted.
func podLine(p *corev1.Pod) string {
	cond := func(c *corev1.PodCondition) string {
		if c == nil {
			return "-"
		}
		return fmt.Sprintf("%s/%s@%s", c.Status, c.Reason, c.LastTransitionTime.UTC().Format("15:04:05"))
	}
	var ready *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			ready = &p.Status.Conditions[i]
		}
	}
	var spec, status []string
	for _, c := range p.Spec.Containers {
		spec = append(spec, c.Image)
	}
	for _, cs := range p.Status.ContainerStatuses {
		status = append(status, fmt.Sprintf("%s(ready %t)", cs.Image, cs.Ready))
	}
	deleting := ""
	if p.DeletionTimestamp != nil {
		deleting = " deleting"
	}
	return fmt.Sprintf("%s gate %s ready %s spec %v status %v%s", p.Name, cond(inplacegate.Condition(p)), cond(ready), spec, status, deleting)
}

// TestRollingUpdate rolls 20 pods with maxUnavailable 2 / maxSurge 0, first
// by recreating them (an env change), then in place (an image change), and
// checks from a watch that never more than 2 pods were unavailable and
// never more than 20 pods existed; the in-place update keeps every pod's
// name and UID.
func TestRollingUpdate(t *testing.T) {
	ns := env.Namespace(t)
	const replicas = 20
	ps := newPodSet(ns, "roll", replicas, func(ps *deckhandv1alpha1.PodSet) {
		ps.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(2))
		ps.Spec.UpdateStrategy.MaxSurge = ptr.To(intstr.FromInt32(0))
	})
	mustCreate(t, ps)
	before := waitConverged(t, ps, replicas, 2*time.Minute)

	oldNames := activeNames(mustOwned(t, before))

	// 1. A change that needs new pods.
	bw := watchBudgets(t, ns)
	mergePatch(t, before, `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"`+pauseImage+`","env":[{"name":"V","value":"2"}]}]}}}}`)
	mid := waitRolledOut(t, ps, replicas)
	if mid.Status.UpdateRevision == before.Status.UpdateRevision {
		t.Fatal("the env change did not change the revision")
	}
	pods, err := ownedPods(ctxT(t), mid)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if slices.Contains(oldNames, p.Name) {
			t.Fatalf("pod %s survived a non-image template change; it should have been recreated", p.Name)
		}
	}
	bw.stop()
	checkRollout(t, "recreate", bw, replicas, 2, 0)

	// 2. An image-only change: in place.
	uids := podUIDs(pods)
	bw = watchBudgets(t, ns)
	mergePatch(t, mid, `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"registry.k8s.io/pause:3.9","env":[{"name":"V","value":"2"}]}]}}}}`)
	after := waitRolledOut(t, ps, replicas)
	pods = mustOwned(t, after)
	for _, p := range pods {
		if uid, ok := uids[p.Name]; !ok || uid != p.UID {
			t.Fatalf("pod %s (uid %s) is new: an image-only change must keep pod names and UIDs", p.Name, p.UID)
		}
		if p.Spec.Containers[0].Image != "registry.k8s.io/pause:3.9" || p.Labels[deckhandv1alpha1.PodSetRevisionLabel] != after.Status.UpdateRevision {
			t.Fatalf("pod %s: image %s, revision %s", p.Name, p.Spec.Containers[0].Image, p.Labels[deckhandv1alpha1.PodSetRevisionLabel])
		}
	}
	bw.stop()
	checkRollout(t, "in place", bw, replicas, 2, 0)
	if after.Status.CurrentRevision != after.Status.UpdateRevision {
		t.Fatalf("currentRevision %s, updateRevision %s after the rollout", after.Status.CurrentRevision, after.Status.UpdateRevision)
	}
}

func mustOwned(t *testing.T, ps *deckhandv1alpha1.PodSet) []corev1.Pod {
	t.Helper()
	pods, err := ownedPods(ctxT(t), ps)
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

// waitRolledOut waits until every pod is on the new revision, running its
// spec's images, and Ready.
func waitRolledOut(t *testing.T, ps *deckhandv1alpha1.PodSet, n int32) *deckhandv1alpha1.PodSet {
	t.Helper()
	return waitPodSet(t, ps, 3*time.Minute, "the rollout completes", func(cur *deckhandv1alpha1.PodSet, pods []corev1.Pod) (bool, string) {
		if cur.Status.ObservedGeneration != cur.Generation {
			return false, "status not observed"
		}
		good := 0
		for i := range pods {
			p := &pods[i]
			if p.DeletionTimestamp == nil && podutil.IsPodReady(p) && runningSpecImages(p) &&
				p.Labels[deckhandv1alpha1.PodSetRevisionLabel] == cur.Status.UpdateRevision {
				good++
			}
		}
		st := cur.Status
		return len(pods) == int(n) && good == int(n) && st.UpdatedReplicas == n && st.AvailableReplicas == n,
			fmt.Sprintf("pods %d, updated+ready %d, status updated %d available %d", len(pods), good, st.UpdatedReplicas, st.AvailableReplicas)
	})
}

func checkRollout(t *testing.T, what string, bw *budgetWatch, replicas, maxUnavailable, maxSurge int) {
	t.Helper()
	bw.mu.Lock()
	defer bw.mu.Unlock()
	unavailable := replicas - bw.minAvailable
	t.Logf("%s rollout: at most %d pods, at most %d unavailable", what, bw.maxTotal, unavailable)
	if unavailable > maxUnavailable {
		t.Errorf("%s rollout: %d pods unavailable at once, want at most %d; the watch's timeline up to then:\n%s",
			what, unavailable, maxUnavailable, strings.Join(bw.worst, "\n"))
	}
	if bw.maxTotal > replicas+maxSurge {
		t.Errorf("%s rollout: %d pods at once, want at most %d", what, bw.maxTotal, replicas+maxSurge)
	}
	if unavailable == 0 {
		t.Errorf("%s rollout: no pod was ever unavailable; the watch saw no rollout", what)
	}
}

// TestSummaryThroughARollout follows a PodSet through the states that tools
// knowing nothing of PodSets read from its summary conditions: Ready
// (kstatus Current, Argo CD Healthy), a rollout that cannot finish because
// its new pods cannot be scheduled (Reconciling: InProgress, Progressing),
// and Ready again once the template is reverted.
func TestSummaryThroughARollout(t *testing.T) {
	ps := createPodSet(t, "summary", 2)
	health.Wait(t, env.Client, ps, 2*time.Minute, health.IsReady(podset.ReasonComplete))

	// maxUnavailable (25% of 2) is 0: the rollout first creates a surge pod,
	// which no node can take, so every old pod stays.
	mergePatch(t, ps, `{"spec":{"template":{"spec":{"nodeSelector":{"apps.deckhand.dev/no-such-node":"true"}}}}}`)
	health.Wait(t, env.Client, ps, time.Minute, health.IsReconciling(podset.ReasonRolloutInProgress))

	mergePatch(t, ps, `{"spec":{"template":{"spec":{"nodeSelector":null}}}}`)
	health.Wait(t, env.Client, ps, 2*time.Minute, health.IsReady(podset.ReasonComplete))
}

// TestPause pauses a rollout halfway (a partition stops it at 3 of 6 pods,
// then one patch pauses the PodSet and lifts the partition), and checks
// that once the controller has observed the paused generation, reconciles
// driven by a scale-up and a scale-down move no old pod to the new
// template; new pods come from the current template and a scale-down takes
// old pods first. Resuming finishes the rollout.
func TestPause(t *testing.T) {
	ps := createPodSet(t, "pause", 6, func(ps *deckhandv1alpha1.PodSet) {
		ps.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		ps.Spec.UpdateStrategy.MaxSurge = ptr.To(intstr.FromInt32(0))
		ps.Spec.UpdateStrategy.Partition = ptr.To[int32](3)
	})
	waitConverged(t, ps, 6, 2*time.Minute)
	mergePatch(t, ps, `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"`+pauseImage+`","env":[{"name":"V","value":"2"}]}]}}}}`)
	health.Wait(t, env.Client, ps, 2*time.Minute, health.IsReady(podset.ReasonComplete))
	if ps.Status.UpdatedReplicas != 3 {
		t.Fatalf("partition 3 of 6 left %d pods updated, want 3", ps.Status.UpdatedReplicas)
	}

	mergePatch(t, ps, `{"spec":{"paused":true,"updateStrategy":{"partition":0}}}`)
	health.Wait(t, env.Client, ps, time.Minute, health.IsPaused(podset.ReasonUpdatePaused))
	progressing := meta.FindStatusCondition(ps.Status.Conditions, deckhandv1alpha1.PodSetProgressingCondition)
	if progressing == nil || progressing.Status != metav1.ConditionUnknown || progressing.Reason != podset.ReasonPaused {
		t.Fatalf("Progressing while paused: %+v, want Unknown/%s", progressing, podset.ReasonPaused)
	}
	// The status of the paused generation was written after a sync that read
	// it: from here on, every sync sees paused.
	old := oldPods(t, ps)
	if len(old) != 3 {
		t.Fatalf("%d old-revision pods when paused, want 3", len(old))
	}

	// Scale up: two more reconciles' worth of work, new pods on the current
	// template, no old pod touched.
	setReplicas(t, ps, 8)
	waitPausedAt(t, ps, 8, 5)
	if got := oldPods(t, ps); !maps.Equal(got, old) {
		t.Fatalf("old pods after a scale-up while paused: %v, want %v unchanged", got, old)
	}

	// Scale down by one: an old pod goes first; the others stay old.
	setReplicas(t, ps, 7)
	waitPausedAt(t, ps, 7, 5)
	got := oldPods(t, ps)
	if len(got) != 2 {
		t.Fatalf("old pods after a scale-down while paused: %v, want 2 of %v", got, old)
	}
	for name, uid := range got {
		if old[name] != uid {
			t.Fatalf("old pod %s (uid %s) was not old when paused (%v)", name, uid, old)
		}
	}

	mergePatch(t, ps, `{"spec":{"paused":false}}`)
	waitRolledOut(t, ps, 7)
	health.Wait(t, env.Client, ps, time.Minute, health.IsReady(podset.ReasonComplete))
}

// oldPods maps the active pods of ps not on its updateRevision (as the
// status last read says it) to their UIDs.
func oldPods(t *testing.T, ps *deckhandv1alpha1.PodSet) map[string]types.UID {
	t.Helper()
	out := map[string]types.UID{}
	for _, p := range mustOwned(t, ps) {
		if p.DeletionTimestamp == nil && p.Labels[deckhandv1alpha1.PodSetRevisionLabel] != ps.Status.UpdateRevision {
			out[p.Name] = p.UID
		}
	}
	return out
}

// waitPausedAt waits until the paused PodSet's status, for its current
// generation, counts n available pods of which updated are on the current
// template, with nothing terminating, and reports the paused rollout.
func waitPausedAt(t *testing.T, ps *deckhandv1alpha1.PodSet, n, updated int32) {
	t.Helper()
	cur := waitPodSet(t, ps, 2*time.Minute, fmt.Sprintf("the paused PodSet settles at %d pods, %d updated", n, updated),
		func(cur *deckhandv1alpha1.PodSet, pods []corev1.Pod) (bool, string) {
			st := cur.Status
			return st.ObservedGeneration == cur.Generation && len(pods) == int(n) && st.Replicas == n &&
					st.AvailableReplicas == n && st.UpdatedReplicas == updated && st.TerminatingReplicas == 0,
				fmt.Sprintf("generation %d observed %d, pods %d, status replicas %d available %d updated %d terminating %d",
					cur.Generation, st.ObservedGeneration, len(pods), st.Replicas, st.AvailableReplicas, st.UpdatedReplicas, st.TerminatingReplicas)
		})
	health.Wait(t, env.Client, cur, time.Minute, health.IsPaused(podset.ReasonUpdatePaused))
	ps.Status = cur.Status
}

// TestInPlaceUpdateWaitsForTheGracePeriod changes the image of a PodSet of
// one pod whose inPlaceUpdateGracePeriodSeconds is 3 and follows the pod
// from a watch: the pod started with its in-place update gate True; on the
// update the gate is written False first, the image is patched no sooner
// than 3 seconds later, and the gate is True again once the container runs
// the new image, the same pod. Again with the manager stopped and started
// as soon as the gate is seen closed: the new manager carries on from the
// pod (the gate and its lastTransitionTime), with the same bounds.
func TestInPlaceUpdateWaitsForTheGracePeriod(t *testing.T) {
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("manager restarted %v", restart), func(t *testing.T) {
			waitGraceThroughUpdate(t, restart)
		})
	}
}

func waitGraceThroughUpdate(t *testing.T, restart bool) {
	const grace = 3 * time.Second
	ps := createPodSet(t, "grace", 1, func(ps *deckhandv1alpha1.PodSet) {
		ps.Spec.UpdateStrategy.InPlaceUpdateGracePeriodSeconds = ptr.To(int32(grace / time.Second))
	})
	before := mustOwned(t, waitConverged(t, ps, 1, 2*time.Minute))
	if c := inplacegate.Condition(&before[0]); !inplacegate.Gated(&before[0]) || c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("a new pod: readiness gates %v, gate condition %+v; want the gate, True", before[0].Spec.ReadinessGates, c)
	}
	var (
		mu                  sync.Mutex
		closedAt, patchedAt time.Time
		reopened            bool
	)
	stop := testutil.WatchPods(t, env.Clientset, ps.Namespace, nil, func(_ watch.EventType, p *corev1.Pod) {
		if p.UID != before[0].UID {
			return // the surge pod (maxSurge 1, maxUnavailable 0)
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case closedAt.IsZero() && inplacegate.Closed(p):
			closedAt = time.Now()
		case patchedAt.IsZero() && p.Spec.Containers[0].Image != pauseImage:
			patchedAt = time.Now()
			if closedAt.IsZero() {
				t.Errorf("image patched before the gate was closed")
			}
		case !patchedAt.IsZero() && inplacegate.Open(p) && podutil.RunsReady(p.Status.ContainerStatuses, "main", p.Spec.Containers[0].Image):
			reopened = true
		}
	})
	defer stop()
	seen := func(what string, done func() bool) {
		t.Helper()
		testutil.Eventually(t, time.Minute, func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			return done(), nil
		}, "%s", what)
	}
	mergePatch(t, ps, `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"registry.k8s.io/pause:3.9"}]}}}}`)
	if restart {
		seen("the gate closed", func() bool { return !closedAt.IsZero() })
		env.StopManager()
		if _, err := env.StartManager(); err != nil {
			t.Fatal(err)
		}
	}
	after := mustOwned(t, waitRolledOut(t, ps, 1))
	seen("the gate open again on the new image", func() bool { return reopened })
	stop()
	// The watch sees both writes a few milliseconds after they are made.
	waited := patchedAt.Sub(closedAt)
	t.Logf("image patched %s after the gate closed", waited.Round(time.Millisecond))
	if waited < grace-200*time.Millisecond {
		t.Errorf("image patched %s after the gate closed, want at least the %s grace period", waited, grace)
	}
	if after[0].UID != before[0].UID {
		t.Errorf("pod %s replaced by %s, want it updated in place", before[0].Name, after[0].Name)
	}
}

// TestPodSetThatNeverUpdatesInPlaceCreatesPodsWithoutTheGate: with
// inPlaceIfPossible false the pods list no in-place update gate, and become
// Ready without the PodSet writing any gate condition; with the default they
// list it and the PodSet opens it.
func TestPodSetThatNeverUpdatesInPlaceCreatesPodsWithoutTheGate(t *testing.T) {
	for _, inPlace := range []bool{false, true} {
		t.Run(fmt.Sprintf("inPlaceIfPossible %t", inPlace), func(t *testing.T) {
			ps := createPodSet(t, fmt.Sprintf("gate-%t", inPlace), 2, func(ps *deckhandv1alpha1.PodSet) {
				ps.Spec.UpdateStrategy.InPlaceIfPossible = ptr.To(inPlace)
			})
			for _, p := range mustOwned(t, waitConverged(t, ps, 2, 2*time.Minute)) {
				c := inplacegate.Condition(&p)
				if inplacegate.Gated(&p) != inPlace || (c != nil) != inPlace {
					t.Errorf("pod %s: readiness gates %v, gate condition %+v; want the gate and its condition: %t",
						p.Name, p.Spec.ReadinessGates, c, inPlace)
				}
			}
		})
	}
}
