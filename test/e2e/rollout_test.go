package e2e

// SidecarSet rollouts as the fake nodes run them: an image that cannot be
// pulled (localcluster.UnpullableImage) and a readiness probe's initial
// delay are what a kubelet would report, so the rollout's limits are
// checked against the pods as a watch sees them, not against the
// controller's own bookkeeping.

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// stuckRolloutWindow is how long a rollout held at maxUnavailable is
// watched for a pod it should not touch: several times what the manager
// takes to update a pod in place here (under a second), and past the
// fake node's ErrImagePull to ImagePullBackOff transition, whose pod
// updates wake the controller again.
const stuckRolloutWindow = 15 * time.Second

// sidecarImage is the image the pod's container called name runs in its
// spec, "" if the pod has no such container.
func sidecarImage(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// updateSidecarSet changes ss with mutate and writes it, retrying on
// conflicts (the manager writes its status meanwhile).
func updateSidecarSet(t *testing.T, ss *deckhandv1alpha1.SidecarSet, mutate func(*deckhandv1alpha1.SidecarSet)) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ss), ss); err != nil {
			return false, err
		}
		mutate(ss)
		err := suite.client.Update(ctx, ss)
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	}, "SidecarSet %s updated", ss.Name)
}

// readyDeployment creates a Deployment of n pause pods labelled labels in
// ns and waits until all n are Ready.
func readyDeployment(t *testing.T, ns string, n int32, labels map[string]string) []corev1.Pod {
	t.Helper()
	dep := testutil.Deployment(ns, "app", n, labels, pauseContainer)
	dep.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	create(t, dep)
	return waitReadyPods(t, ns, n, labels)
}

// TestSidecarSetRolloutStopsAtMaxUnavailable rolls a SidecarSet's sidecar
// out to an image no node can pull, with maxUnavailable 2 over 5 pods, and
// follows every pod event from a watch: the rollout updates 2 pods, which
// never turn Ready, and stops there (the status says so: 5 matched, 3
// ready, none updated), touching no third pod over a further observation
// window; never more than 2 pods are not Ready at once. Setting the image
// back brings the 2 pods back and every pod Ready on the latest revision.
func TestSidecarSetRolloutStopsAtMaxUnavailable(t *testing.T) {
	const pods, maxUnavailable = 5, 2
	ns := namespace(t)
	labels := map[string]string{"app": "stuck-" + ns}
	good, bad := "registry.example/log-shipper:1", localcluster.UnpullableImage("log-shipper:2")
	ss := sidecarSetFor(ns, labels, deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: "log-shipper", Image: good}})
	ss.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(maxUnavailable))
	createObservedSidecarSet(t, ss)
	readyDeployment(t, ns, pods, labels)

	var (
		mu          sync.Mutex
		notReady    = map[types.UID]bool{}
		touched     = map[types.UID]bool{}
		maxNotReady int
		events      int
		extra       = make(chan types.UID, pods)
	)
	observe := func(ev watch.EventType, p *corev1.Pod) {
		mu.Lock()
		defer mu.Unlock()
		events++
		if ev == watch.Deleted || p.DeletionTimestamp != nil {
			delete(notReady, p.UID)
			return
		}
		if podutil.IsPodReady(p) {
			delete(notReady, p.UID)
		} else {
			notReady[p.UID] = true
		}
		maxNotReady = max(maxNotReady, len(notReady))
		if sidecarImage(p, "log-shipper") == bad && !touched[p.UID] {
			touched[p.UID] = true
			if len(touched) > maxUnavailable {
				extra <- p.UID
			}
		}
	}
	stop := testutil.WatchPods(t, suite.clientset, ns, func(p *corev1.Pod) { observe(watch.Added, p) }, observe)
	defer stop()

	updateSidecarSet(t, ss, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = bad })
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		select {
		case uid := <-extra:
			t.Fatalf("the rollout updated pod %s, a pod beyond maxUnavailable %d", uid, maxUnavailable)
		default:
		}
		err := suite.client.Get(ctx, client.ObjectKeyFromObject(ss), ss)
		st := ss.Status
		return err == nil && st.ObservedGeneration == ss.Generation && st.MatchedPods == pods &&
			st.ReadyPods == pods-maxUnavailable && st.UpdatedPods == 0 &&
			meta.IsStatusConditionFalse(st.Conditions, deckhandv1alpha1.SidecarSetPodsUpdatedCondition), err
	}, "the SidecarSet reports %d of %d pods unavailable on the new revision (status %+v)", maxUnavailable, pods, ss.Status)

	// The rollout is held: over the window no third pod is touched.
	mu.Lock()
	atHold := events
	mu.Unlock()
	window := time.NewTimer(stuckRolloutWindow)
	defer window.Stop()
	select {
	case uid := <-extra:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("the rollout updated pod %s, a pod beyond maxUnavailable %d, while %d pods were not Ready", uid, maxUnavailable, len(notReady))
	case <-window.C:
	}
	mu.Lock()
	if len(touched) != maxUnavailable {
		t.Errorf("%d pods got the unpullable image, want %d", len(touched), maxUnavailable)
	}
	t.Logf("held at %d pods for %s (%d pod events in the window)", len(touched), stuckRolloutWindow, events-atHold)
	mu.Unlock()
	if err := suite.client.Get(tctx(t), client.ObjectKeyFromObject(ss), ss); err != nil {
		t.Fatal(err)
	}
	if st := ss.Status; st.ReadyPods != pods-maxUnavailable || st.UpdatedPods != 0 {
		t.Errorf("status after the window: ready %d, updated %d; want %d and 0", st.ReadyPods, st.UpdatedPods, pods-maxUnavailable)
	}

	// The image set back: the stuck pods run it again and the rollout is done.
	updateSidecarSet(t, ss, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = good })
	testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		err := suite.client.Get(ctx, client.ObjectKeyFromObject(ss), ss)
		st := ss.Status
		return err == nil && st.ObservedGeneration == ss.Generation && st.MatchedPods == pods &&
			st.ReadyPods == pods && st.UpdatedPods == pods && st.UpdatedReadyPods == pods, err
	}, "every pod Ready on the latest revision after the image is set back (status %+v)", ss.Status)
	live, err := testutil.LivePods(tctx(t), suite.client, ns, labels)
	if err != nil {
		t.Fatal(err)
	}
	for i := range live {
		p := &live[i]
		if img := sidecarImage(p, "log-shipper"); img != good || !podutil.RunsReady(p.Status.ContainerStatuses, "log-shipper", good) {
			t.Errorf("pod %s: log-shipper spec image %q, want %s running ready", p.Name, img, good)
		}
	}
	stop()
	mu.Lock()
	defer mu.Unlock()
	if maxNotReady > maxUnavailable {
		t.Errorf("%d pods were not Ready at once, want at most maxUnavailable %d", maxNotReady, maxUnavailable)
	}
	if len(touched) != maxUnavailable {
		t.Errorf("%d pods ever got the unpullable image, want %d", len(touched), maxUnavailable)
	}
}

// hotProbeDelay is the readiness probe's initialDelaySeconds of the
// HotUpgrade sidecar: the fake node reports a started container ready this
// long after its startedAt, so "ready" comes measurably after "running".
const hotProbeDelay = 3

// TestHotUpgradeSwitchesOnlyOnceReady hot-upgrades a sidecar whose
// readiness probe has an initial delay and follows every pod event from a
// watch: in each pod the new image first runs in the idle container without
// being ready, and the working-container annotation names that container
// only in an event where, or after one where, it runs the new image ready,
// never before its startedAt plus the probe's delay. Every pod ends working
// in the new container with the old one idle on the empty image.
func TestHotUpgradeSwitchesOnlyOnceReady(t *testing.T) {
	const pods = 2
	ns := namespace(t)
	labels := map[string]string{"app": "hot-" + ns}
	oldImage, newImage, emptyImage := "registry.example/proxy:1", "registry.example/proxy:2", "registry.example/proxy-empty:1"
	ss := sidecarSetFor(ns, labels, deckhandv1alpha1.SidecarContainer{
		Container: corev1.Container{
			Name:  "proxy",
			Image: oldImage,
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(15000)}},
				InitialDelaySeconds: hotProbeDelay,
			},
			Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"/migrate"}}}},
		},
		UpgradeStrategy: &deckhandv1alpha1.SidecarContainerUpgradeStrategy{
			UpgradeType: deckhandv1alpha1.HotUpgrade, HotUpgradeEmptyImage: emptyImage,
		},
	})
	ss.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(pods))
	createObservedSidecarSet(t, ss)
	readyDeployment(t, ns, pods, labels)
	first, second := sidecarcontrol.HotUpgradeSlots("proxy")

	// What the watch saw of each pod's new container.
	type seen struct {
		runningNotReady bool      // ran the new image, not ready
		readyAt         time.Time // first seen running it ready
		startedAt       time.Time // its run's startedAt when ready
		switchedAt      time.Time // first seen named working
	}
	var (
		mu    sync.Mutex
		pod   = map[types.UID]*seen{}
		early []string
	)
	observe := func(ev watch.EventType, p *corev1.Pod) {
		if ev == watch.Deleted {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		s := pod[p.UID]
		if s == nil {
			s = &seen{}
			pod[p.UID] = s
		}
		slot := ""
		for _, c := range []string{first, second} {
			if sidecarImage(p, c) == newImage {
				slot = c
			}
		}
		if slot == "" {
			return
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name != slot || cs.State.Running == nil || !podutil.ImageMatches(newImage, cs) {
				continue
			}
			if !cs.Ready {
				s.runningNotReady = true
			} else if s.readyAt.IsZero() {
				s.readyAt, s.startedAt = now, cs.State.Running.StartedAt.Time
			}
		}
		if work, _ := sidecarcontrol.HotUpgradeSlotsOf("proxy", sidecarcontrol.WorkingContainers(p.Annotations)); work == slot && s.switchedAt.IsZero() {
			s.switchedAt = now
			if s.readyAt.IsZero() {
				early = append(early, p.Name+" (status "+containerStatusesString(p.Status.ContainerStatuses)+")")
			}
		}
	}
	stop := testutil.WatchPods(t, suite.clientset, ns, nil, observe)
	defer stop()

	updateSidecarSet(t, ss, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = newImage })
	testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		mu.Lock()
		switchedEarly := append([]string(nil), early...)
		mu.Unlock()
		if len(switchedEarly) > 0 {
			t.Fatalf("the working container switched before the new one was ready: %v", switchedEarly)
		}
		live, err := testutil.LivePods(ctx, suite.client, ns, labels)
		if err != nil || len(live) != pods {
			return false, err
		}
		for i := range live {
			p := &live[i]
			work, idle := sidecarcontrol.HotUpgradeSlotsOf("proxy", sidecarcontrol.WorkingContainers(p.Annotations))
			if work != second || !podutil.RunsReady(p.Status.ContainerStatuses, work, newImage) ||
				sidecarImage(p, idle) != emptyImage || !podutil.RunsReady(p.Status.ContainerStatuses, idle, emptyImage) {
				return false, nil
			}
		}
		return true, nil
	}, "every pod works in %s with %s and idles on %s", second, newImage, emptyImage)
	stop()

	mu.Lock()
	defer mu.Unlock()
	if len(early) > 0 {
		t.Fatalf("the working container switched before the new one was ready: %v", early)
	}
	switched := 0
	for uid, s := range pod {
		if s.switchedAt.IsZero() {
			continue
		}
		switched++
		if !s.runningNotReady {
			t.Errorf("pod %s: the new container was never seen running not ready; the probe delay did not show", uid)
		}
		if due := s.startedAt.Add(hotProbeDelay * time.Second); s.switchedAt.Before(due) {
			t.Errorf("pod %s: switched at %s, before the new container's startedAt %s + %ds", uid, s.switchedAt.Format(time.RFC3339Nano), s.startedAt, hotProbeDelay)
		}
		t.Logf("pod %s: ready %s after startedAt, switched %s after ready", uid, s.readyAt.Sub(s.startedAt).Round(time.Millisecond), s.switchedAt.Sub(s.readyAt).Round(time.Millisecond))
	}
	if switched != pods {
		t.Errorf("the watch saw %d pods switch, want %d", switched, pods)
	}
}

// containerStatusesString is each status's name, image and readiness.
func containerStatusesString(statuses []corev1.ContainerStatus) string {
	out := ""
	for _, cs := range statuses {
		out += cs.Name + "=" + cs.Image + " ready=" + map[bool]string{true: "true", false: "false"}[cs.Ready] + "; "
	}
	return out
}
