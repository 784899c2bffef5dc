package sidecarset_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

const emptyImage = "proxy-empty:1"

// hotScenario is a scenario whose sidecar proxy is HotUpgrade, injected
// as proxy-1 (working, proxy:1) and proxy-2 (idle, the empty image).
func hotScenario(t *testing.T, app string) *scenario {
	return newScenario(t, app, func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/migrate.sh"}}}}
		s.Spec.Containers[0].UpgradeStrategy = &deckhandv1alpha1.SidecarContainerUpgradeStrategy{
			UpgradeType: deckhandv1alpha1.HotUpgrade, HotUpgradeEmptyImage: emptyImage}
	})
}

// hotState is what a pod shows of its HotUpgrade sidecar proxy.
type hotState struct {
	working, idle           string
	workImage, idleImage    string
	workRunning, idleIdling bool // status reports the spec image, ready
}

func readHotState(p *corev1.Pod) hotState {
	work, idle := sidecarcontrol.HotUpgradeSlotsOf("proxy", sidecarcontrol.WorkingContainers(p.Annotations))
	st := hotState{working: work, idle: idle, workImage: containerImage(p, work), idleImage: containerImage(p, idle)}
	if s := podutil.FindStatus(p.Status.ContainerStatuses, work); s != nil {
		st.workRunning = s.Ready && podutil.ImageMatches(st.workImage, *s)
	}
	if s := podutil.FindStatus(p.Status.ContainerStatuses, idle); s != nil {
		st.idleIdling = s.Ready && podutil.ImageMatches(emptyImage, *s) && st.idleImage == emptyImage
	}
	return st
}

// waitHotDone waits until every pod of the scenario has the hot upgrade of
// proxy done: the container named works with image, running it ready, and
// the other one idles on the empty image.
func (sc *scenario) waitHotDone(working, image string) []corev1.Pod {
	sc.t.Helper()
	var pods []corev1.Pod
	testutil.Eventually(sc.t, 90*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		if pods, err = listPods(ctx, sc.ns); err != nil {
			return false, err
		}
		for i := range pods {
			st := readHotState(&pods[i])
			if st.working != working || st.workImage != image || !st.workRunning || !st.idleIdling {
				return false, nil
			}
		}
		return len(pods) > 0, nil
	}, "every pod works in %s with %s and idles on %s in the other container", working, image, emptyImage)
	return pods
}

// TestHotUpgrade checks a hot upgrade on pods run by the fake node, which
// restarts a container whose image changes: an image change starts the new
// image in the idle container, switches the working container to it once
// it is ready, and resets the old one to the empty image, in the same pods
// (same UIDs); the versions follow; the status counts the pods updated.
// A second image change moves the work back to the first container.
func TestHotUpgrade(t *testing.T) {
	sc := hotScenario(t, "hot")
	created := sc.createPods("pod-%d", 2)
	uids := uidsByName(created)
	for _, p := range created {
		if got := names(p.Spec.Containers); fmt.Sprint(got) != "[proxy-1 proxy-2 app]" {
			t.Fatalf("pod %s injected with %v", p.Name, got)
		}
	}
	sc.waitHotDone("proxy-1", "proxy:1")
	sc.waitStatus(60*time.Second, "2 pods updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.UpdatedReadyPods == 2
	})

	for _, step := range []struct{ image, working string }{{"proxy:2", "proxy-2"}, {"proxy:3", "proxy-1"}} {
		s := sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = step.image })
		pods := sc.waitHotDone(step.working, step.image)
		for i := range pods {
			p := &pods[i]
			wantNotRecreated(t, p, uids)
			st := readHotState(p)
			for key, want := range map[string]string{
				deckhandv1alpha1.SidecarSetVersionAnnotationPrefix + st.working:    fmt.Sprint(s.Generation),
				deckhandv1alpha1.SidecarSetVersionAnnotationPrefix + st.idle:       "0",
				deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix + st.working: "0",
				deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix + st.idle:    "0",
			} {
				if p.Annotations[key] != want {
					t.Errorf("pod %s after the upgrade to %s: %s = %q, want %q", p.Name, step.image, key, p.Annotations[key], want)
				}
			}
		}
		sc.waitStatus(60*time.Second, "2 pods updated, none hot-upgrading", func(s *deckhandv1alpha1.SidecarSet) bool {
			return s.Status.UpdatedReadyPods == 2 && s.Status.HotUpgradingPods == 0
		})
	}
}

// TestHotUpgradeResumesAfterRestart leaves a pod where a controller that
// stopped right after the first step of a hot upgrade leaves it (the idle
// container patched to the new image, the pod recording the new revision)
// while the manager is down, and checks that the manager, started again,
// switches and resets from what the pod shows, even though the partition
// would not start an upgrade of that pod.
func TestHotUpgradeResumesAfterRestart(t *testing.T) {
	sc := hotScenario(t, "hotcrash")
	pod := sc.createPods("pod-%d", 1)[0]
	sc.waitHotDone("proxy-1", "proxy:1")
	s := sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Image = "proxy:2"
		s.Spec.UpdateStrategy.Partition = podCount(1)
	})
	sc.waitStatus(60*time.Second, "the pod held by the partition", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 1 && s.Status.UpdatedPods == 0
	})

	env.StopManager()
	restarted := false
	defer func() {
		if !restarted {
			_, _ = env.StartManager()
		}
	}()
	// The first step, as the controller takes it.
	ctx := ctxT(t)
	cur, err := sc.getPod(ctx, pod.Name)
	if err != nil {
		t.Fatal(err)
	}
	next := cur.DeepCopy()
	for i := range next.Spec.Containers {
		if next.Spec.Containers[i].Name == "proxy-2" {
			next.Spec.Containers[i].Image = "proxy:2"
		}
	}
	rec := sidecarcontrol.ReadPodRecord(next.Annotations)
	hash, withoutImage := sidecarcontrol.Hashes(&s.Spec)
	rec.Set(s.Name, hash, withoutImage, rec.Containers(s.Name))
	rec.Apply(next)
	gen := fmt.Sprint(s.Generation)
	next.Annotations[deckhandv1alpha1.SidecarSetVersionAnnotationPrefix+"proxy-2"] = gen
	next.Annotations[deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix+"proxy-2"] = cur.Annotations[deckhandv1alpha1.SidecarSetVersionAnnotationPrefix+"proxy-1"]
	next.Annotations[deckhandv1alpha1.SidecarSetVersionAltAnnotationPrefix+"proxy-1"] = gen
	if err := env.Client.Patch(ctx, next, client.MergeFrom(cur)); err != nil {
		t.Fatal(err)
	}
	// The fake node runs the new image in proxy-2; nothing switches while
	// the manager is down.
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		p, err := sc.getPod(ctx, pod.Name)
		if err != nil {
			return false, err
		}
		st := podutil.FindStatus(p.Status.ContainerStatuses, "proxy-2")
		return st != nil && st.Ready && podutil.ImageMatches("proxy:2", *st), nil
	}, "the fake node runs proxy:2 in proxy-2")
	if p, _ := sc.getPod(ctx, pod.Name); readHotState(p).working != "proxy-1" {
		t.Fatalf("switched with the manager down: %+v", readHotState(p))
	}

	if _, err := env.StartManager(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	pods := sc.waitHotDone("proxy-2", "proxy:2")
	if pods[0].UID != pod.UID {
		t.Errorf("the pod was recreated")
	}
	sc.waitStatus(60*time.Second, "the pod counted updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.UpdatedPods == 1 && s.Status.HotUpgradingPods == 0
	})
}
