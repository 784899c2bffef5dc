package sidecarset_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	sidecarsetctrl "github.com/deckhand-dev/deckhand/internal/controller/sidecarset"
	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// The tests of this file are about the pace and order of a rolling update:
// the unavailability budget, the partition, pausing, and the wait for the
// cache to confirm the updates already made.

// availabilityWatch follows every pod of ns from a watch and records the
// largest number of pods that were at once unavailable to the rollout: not
// Ready, or in the middle of a sidecar update (spec image not yet reported
// by the status). A pod marked brokenBefore was not Ready before the
// rollout, for reasons of its own, and does not count: updating it takes
// nothing away that was there, and the rollout's budget is for the
// unavailability it causes.
type availabilityWatch struct {
	mu           sync.Mutex
	brokenBefore map[string]bool
	unavailable  map[string]bool
	max          int
	order        []string // pods in the order their sidecar spec image changed to the new image
	seen         map[string]bool
	stop         func()
}

func watchAvailability(t *testing.T, ns, sidecar, newImage string) *availabilityWatch {
	t.Helper()
	a := &availabilityWatch{unavailable: map[string]bool{}, seen: map[string]bool{}, brokenBefore: map[string]bool{}}
	observe := func(p *corev1.Pod) { a.observe(p, sidecar, newImage) }
	a.stop = testutil.WatchPods(t, env.Clientset, ns, observe, func(ev watch.EventType, p *corev1.Pod) {
		if ev != watch.Deleted {
			observe(p)
		}
	})
	return a
}

func (a *availabilityWatch) observe(p *corev1.Pod, sidecar, newImage string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	spec := containerImage(p, sidecar)
	status := ""
	if cs := podutil.FindStatus(p.Status.ContainerStatuses, sidecar); cs != nil {
		status = cs.Image
	}
	a.unavailable[p.Name] = !a.brokenBefore[p.Name] && (!podutil.IsPodReady(p) || spec != status)
	if spec == newImage && !a.seen[p.Name] {
		a.seen[p.Name] = true
		a.order = append(a.order, p.Name)
	}
	n := 0
	for _, u := range a.unavailable {
		if u {
			n++
		}
	}
	if n > a.max {
		a.max = n
	}
}

// notReadyBefore marks pod as not Ready before the rollout, for reasons of
// its own.
func (a *availabilityWatch) notReadyBefore(pod string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.brokenBefore[pod] = true
}

func (a *availabilityWatch) result() (int, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.max, append([]string(nil), a.order...)
}

func TestRollingUpdate(t *testing.T) {
	sc := newScenario(t, "roll", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.MaxUnavailable = podCount(2)
		s.Spec.UpdateStrategy.Partition = podCount(5)
	})
	ns, name := sc.ns, sc.name

	const n = 20
	for _, p := range sc.createPods("pod-%02d", n) {
		if containerImage(p, "proxy") != "proxy:1" {
			t.Fatalf("pod %s not injected: %+v", p.Name, p.Spec.Containers)
		}
	}
	sc.waitStatus(90*time.Second, "all 20 pods matched, updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		st := s.Status
		return st.MatchedPods == n && st.UpdatedPods == n && st.ReadyPods == n && st.UpdatedReadyPods == n && st.NotInjectedPods == 0
	})

	watch := watchAvailability(t, ns, "proxy", "proxy:2")
	defer watch.stop()

	// One pod not ready before the rollout: it must be updated first, and
	// without using the budget; its own unavailability is not the rollout's.
	watch.notReadyBefore("pod-19")
	markNotReady(t, ns, "pod-19")

	// Paused: the new revision is recorded, nothing is updated.
	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Paused = true
		s.Spec.Containers[0].Image = "proxy:2"
	})
	paused := sc.waitStatus(30*time.Second, "the paused rollout is reported", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return c != nil && c.Reason == "UpdatePaused" && s.Status.UpdatedPods == 0
	})
	hash, _ := sidecarcontrol.Hashes(&paused.Spec)
	if paused.Status.LatestRevision != hash {
		t.Errorf("latestRevision = %s, want %s", paused.Status.LatestRevision, hash)
	}
	pods := sc.pods()
	for i := range pods {
		if img := containerImage(&pods[i], "proxy"); img != "proxy:1" {
			t.Errorf("pod %s was updated while the rollout was paused: %s", pods[i].Name, img)
		}
	}

	// Unpaused with partition 5: 15 pods move, 5 stay.
	sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = false })
	held := sc.waitStatus(3*time.Minute, "15 pods updated, held by partition", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return s.Status.UpdatedPods == 15 && s.Status.UpdatedReadyPods == 15 && c != nil && c.Reason == "UpdateHeld"
	})
	if held.Status.MatchedPods != n {
		t.Errorf("matchedPods = %d, want %d", held.Status.MatchedPods, n)
	}
	pods = sc.pods()
	old := 0
	for i := range pods {
		if containerImage(&pods[i], "proxy") == "proxy:1" {
			old++
		}
	}
	if old != 5 {
		t.Errorf("%d pods on the old image, want partition 5", old)
	}

	// Partition 0: the rest follow.
	sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Partition = podCount(0) })
	// PodsUpdated says every pod runs the latest revision; the last pod's
	// in-place update gate opens once its sidecar is ready, a moment later.
	final := sc.waitStatus(2*time.Minute, "all 20 pods updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return s.Status.UpdatedPods == n && s.Status.UpdatedReadyPods == n && c != nil && c.Status == metav1.ConditionTrue
	})
	st := final.Status
	if st.MatchedPods != n || st.ReadyPods != n || st.UpdatedReadyPods != n || st.NotInjectedPods != 0 || st.NotUpdatablePods != 0 {
		t.Errorf("final status = %+v", st)
	}
	pods = sc.pods()
	for i := range pods {
		p := &pods[i]
		rev, _ := sidecarcontrol.ReadPodRecord(p.Annotations).Revisions(name)
		if containerImage(p, "proxy") != "proxy:2" || rev != st.LatestRevision {
			t.Errorf("pod %s: image %s, revision %s; want proxy:2 at %s", p.Name, containerImage(p, "proxy"), rev, st.LatestRevision)
		}
	}

	watch.stop()
	maxUnavailable, order := watch.result()
	t.Logf("at most %d pods were unavailable or mid-update at once; update order %v", maxUnavailable, order)
	if maxUnavailable > 2 {
		t.Errorf("%d pods were unavailable or mid-update at once, maxUnavailable is 2", maxUnavailable)
	}
	if len(order) != n {
		t.Errorf("saw %d pods change image, want %d", len(order), n)
	}
	if len(order) > 0 && order[0] != "pod-19" {
		t.Errorf("the not-ready pod-19 was not updated first: %v", order)
	}
}

// markNotReady sets the pod's Ready condition False, as a kubelet whose
// readiness probe fails would.
func markNotReady(t *testing.T, ns, name string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := listPods(ctx, ns)
		if err != nil {
			return false, err
		}
		for i := range pods {
			p := &pods[i]
			if p.Name != name {
				continue
			}
			for j := range p.Status.Conditions {
				if p.Status.Conditions[j].Type == corev1.PodReady {
					p.Status.Conditions[j].Status = corev1.ConditionFalse
				}
			}
			return true, env.Client.Status().Update(ctx, p)
		}
		return false, nil
	}, "pod %s marked not ready", name)
}

// TestPercentagePartition checks that a percentage partition keeps that
// share of the matched pods, rounded up (docs/sidecarset.md), on the old
// revision: of 5 pods, "50%" keeps 3 and "10%" keeps 1, where rounding
// down would keep 2 and 0.
func TestPercentagePartition(t *testing.T) {
	sc := newScenario(t, "pct", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.MaxUnavailable = podCount(2)
	})

	const n = 5
	sc.createPods("pod-%d", n)
	before := sc.waitStatus(60*time.Second, "5 pods matched, updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == n && s.Status.UpdatedReadyPods == n
	})
	oldRevision := before.Status.LatestRevision

	s := sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "proxy:2"
		s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("50%"))
	})
	newRevision, _ := sidecarcontrol.Hashes(&s.Spec)
	sc.checkPartition(n, 3, oldRevision, newRevision)

	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("10%"))
	})
	sc.checkPartition(n, 1, oldRevision, newRevision)

	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Partition = ptr.To(intstr.FromString("0%"))
	})
	sc.waitStatus(90*time.Second, "every pod updated with partition 0%", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.UpdatedReadyPods == n
	})
}

// checkPartition waits until the rollout reports itself held with
// total-kept pods updated, then checks that exactly kept pods are still on
// the old image and revision.
func (sc *scenario) checkPartition(total, kept int32, oldRevision, newRevision string) {
	t := sc.t
	t.Helper()
	// UpdateHeld is reported only with no update in flight and none left
	// to make, so the counts it comes with are where the rollout stops, not
	// a moment on the way. AllPodsUpdated ends the wait too: a partition
	// that rounded to 0 lets every pod through.
	held := sc.waitStatus(90*time.Second, "the rollout stopped", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return c != nil && (c.Reason == "UpdateHeld" || c.Status == metav1.ConditionTrue)
	})
	if c := condition(held, deckhandv1alpha1.SidecarSetPodsUpdatedCondition); c.Reason != "UpdateHeld" ||
		held.Status.MatchedPods != total || held.Status.UpdatedPods != total-kept || held.Status.UpdatedReadyPods != total-kept {
		t.Fatalf("rollout stopped with %s; want UpdateHeld with %d pods updated and ready, %d kept", statusOf(&held), total-kept, kept)
	}
	pods := sc.pods()
	var old, updated int32
	for i := range pods {
		p := &pods[i]
		rev, _ := sidecarcontrol.ReadPodRecord(p.Annotations).Revisions(sc.name)
		switch img := containerImage(p, "proxy"); {
		case img == "proxy:1" && rev == oldRevision:
			old++
		case img == "proxy:2" && rev == newRevision:
			updated++
		default:
			t.Errorf("pod %s: image %s at revision %s", p.Name, img, rev)
		}
	}
	if old != kept || updated != total-kept {
		t.Errorf("%d pods on the old revision and %d on the new, want %d and %d", old, updated, kept, total-kept)
	}
}

// TestUnobservedUpdateHoldsOnlyUntilTTL: the controller waits for its
// cache to show a pod it updated before it updates more, but an update the
// cache never confirms (a lost event) holds the rollout only until the
// expectations' TTL, not forever.
func TestUnobservedUpdateHoldsOnlyUntilTTL(t *testing.T) {
	sc := newScenario(t, "ttl")
	name := sc.name
	p := sc.create(sc.pod("pod-0"))
	sc.waitStatus(60*time.Second, "the pod matched and updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 1 && s.Status.UpdatedPods == 1
	})

	// As far as the controller knows, it updated pod-0 to a revision its
	// cache will never show.
	updateExpectations.ExpectUpdates(name, map[string]string{string(p.UID): "never-observed"})

	s := sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "proxy:2" })
	hash, _ := sidecarcontrol.Hashes(&s.Spec)
	// The status of the new generation is written by the reconcile that
	// decided the pod's update (updates come first), so once it is there
	// the pod was held.
	sc.waitStatus(30*time.Second, "the new revision computed", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.LatestRevision == hash
	})
	if img := sc.podImage("pod-0", "proxy"); img != "proxy:1" {
		t.Fatalf("pod-0 was updated to %s while an update of it was still expected", img)
	}

	expectClock.Step(expectations.DefaultTTL + time.Second)
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		got, err := sc.getPod(ctx, "pod-0")
		if err != nil {
			return false, err
		}
		rev, _ := sidecarcontrol.ReadPodRecord(got.Annotations).Revisions(name)
		return containerImage(got, "proxy") == "proxy:2" && rev == hash, nil
	}, "pod-0 updated to proxy:2 once the unobserved expectation expired")
}

// failingRollout starts the scenario app with four pods, maxUnavailable 1,
// a progress deadline of 3s and onFailure as given; once every pod is
// updated and the revision stable, it rolls out a sidecar image that cannot
// be pulled, which it returns.
func failingRollout(t *testing.T, app string, onFailure deckhandv1alpha1.RolloutFailurePolicy) (*scenario, string) {
	t.Helper()
	sc := newScenario(t, app, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.MaxUnavailable = podCount(1)
		s.Spec.UpdateStrategy.ProgressDeadlineSeconds = ptr.To[int32](3)
		s.Spec.UpdateStrategy.OnFailure = onFailure
	})
	const n = 4
	sc.createPods("pod-%d", n)
	sc.waitStatus(90*time.Second, "the pods are updated and the revision stable", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.UpdatedReadyPods == n && s.Status.StableRevision == s.Status.LatestRevision
	})
	bad := localcluster.UnpullableImage("proxy:2")
	sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = bad })
	return sc, bad
}

// rolloutFailed reports whether the rollout of the latest revision of s
// failed, handled as reason says in RolloutFailed and PodsUpdated, with
// Stalled ProgressDeadlineExceeded.
func rolloutFailed(reason string) func(*deckhandv1alpha1.SidecarSet) bool {
	return func(s *deckhandv1alpha1.SidecarSet) bool {
		rf, pu := condition(s, deckhandv1alpha1.RolloutFailedCondition), condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		stalled := condition(s, "Stalled")
		return s.Status.FailedRevision == s.Status.LatestRevision && rf != nil && rf.Reason == reason &&
			pu != nil && pu.Reason == reason &&
			stalled != nil && stalled.Status == metav1.ConditionTrue && stalled.Reason == sidecarsetctrl.ReasonProgressDeadlineExceeded
	}
}

// runningImage counts the pods of sc whose proxy container is image.
func runningImage(ctx context.Context, sc *scenario, image string) (int, error) {
	pods, err := listPods(ctx, sc.ns)
	n := 0
	for i := range pods {
		if containerImage(&pods[i], "proxy") == image {
			n++
		}
	}
	return n, err
}

// TestFailedRolloutPauses rolls a sidecar image that cannot be pulled out
// to four pods with maxUnavailable 1 and onFailure Pause: the one pod
// updated never gets its sidecar ready, so after the progress deadline (3s)
// the rollout has failed: RolloutFailed and PodsUpdated say RolloutPaused,
// Stalled says ProgressDeadlineExceeded, one Warning RolloutFailed Event is
// recorded. Raising maxUnavailable then updates no further pod, though
// updateStrategy.paused is not set.
func TestFailedRolloutPauses(t *testing.T) {
	sc, bad := failingRollout(t, "failing", deckhandv1alpha1.PauseRolloutFailurePolicy)
	failed := rolloutFailed(sidecarsetctrl.ReasonRolloutPaused)
	sc.waitStatus(time.Minute, "the rollout fails and pauses", failed)
	waitEvent(t, sc.name, corev1.EventTypeWarning, sidecarsetctrl.ReasonRolloutFailed, "onFailure is Pause")

	sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.MaxUnavailable = podCount(3) })
	sc.waitStatus(time.Minute, "the failed rollout stays paused with more room", failed)
	// Several times what an in-place update takes here (a second or two,
	// the restart gate's grace included).
	testutil.Consistently(t, 10*time.Second, func(ctx context.Context) error {
		updated, err := runningImage(ctx, sc, bad)
		if err == nil && updated != 1 {
			err = fmt.Errorf("%d pods run %s, want the 1 updated before the rollout failed", updated, bad)
		}
		return err
	}, "no further pod is updated")
}

// TestFailedRolloutRollsBack rolls the same image out with onFailure
// Rollback: once the rollout has failed, the pod updated returns in place
// to the stable revision's image and every pod is ready on it, while the
// spec keeps the new image (RolloutFailed and PodsUpdated RolledBack, one
// Warning RolloutFailed Event). A restarted manager keeps them there.
func TestFailedRolloutRollsBack(t *testing.T) {
	sc, bad := failingRollout(t, "rollback", deckhandv1alpha1.RollbackRolloutFailurePolicy)
	s := sc.waitStatus(2*time.Minute, "the rollout fails and the pods are back on the stable revision", func(s *deckhandv1alpha1.SidecarSet) bool {
		return rolloutFailed(sidecarsetctrl.ReasonRolledBack)(s) && s.Status.ReadyPods == 4
	})
	waitEvent(t, sc.name, corev1.EventTypeWarning, sidecarsetctrl.ReasonRolloutFailed, "onFailure is Rollback")
	if img := s.Spec.Containers[0].Image; img != bad {
		t.Errorf("spec image %s, want %s: the controller changed the spec", img, bad)
	}
	if n, err := runningImage(ctxT(t), sc, "proxy:1"); err != nil || n != 4 {
		t.Errorf("%d pods run proxy:1 (%v), want all 4 back on the stable image", n, err)
	}

	// A manager started afresh, with no memory of the failure, reads it
	// from the status: with more room it still moves no pod forward.
	env.StopManager()
	if _, err := env.StartManager(); err != nil {
		t.Fatal(err)
	}
	sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.MaxUnavailable = podCount(3) })
	sc.waitStatus(time.Minute, "the new manager keeps the rollout rolled back", rolloutFailed(sidecarsetctrl.ReasonRolledBack))
	testutil.Consistently(t, 10*time.Second, func(ctx context.Context) error {
		back, err := runningImage(ctx, sc, "proxy:1")
		if err == nil && back != 4 {
			err = fmt.Errorf("%d of 4 pods run proxy:1", back)
		}
		return err
	}, "the pods stay on the stable revision")
}
