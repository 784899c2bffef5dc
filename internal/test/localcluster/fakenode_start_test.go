package localcluster

// How a fake node brings a container up, as a kubelet would: not running
// until its postStart hook has returned, not started before its startup
// probe's delay, not ready before its readiness probe's delay.

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// TestFakeNodeWaitsForReadinessProbeDelay starts a pod whose container has a
// readiness probe with initialDelaySeconds, then updates the container's
// image in place, and follows the pod from a watch as a kubelet reports it:
// each time the container runs (the new image after the update) but is not
// ready, and the pod is not Ready, until initialDelaySeconds after the
// container's startedAt; then both are ready.
func TestFakeNodeWaitsForReadinessProbeDelay(t *testing.T) {
	const delay = 3
	_, pods, ctx := fakeNodePods(t)
	pod := createOnFakeNode(t, ctx, pods, "probed", corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: "app:1", ReadinessProbe: &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
			InitialDelaySeconds: delay,
		}}},
	})
	rv := ""
	for _, image := range []string{"app:1", "app:2"} {
		if image != "app:1" {
			rv = patchPod(t, ctx, pods, pod.Name, `{"spec":{"containers":[{"name":"app","image":"`+image+`"}]}}`).ResourceVersion
		}
		var runningNotReady *corev1.ContainerStatus
		ready := waitPod(t, ctx, pods, pod.Name, rv, func(p *corev1.Pod) bool {
			if len(p.Status.ContainerStatuses) == 0 {
				return false
			}
			cs := p.Status.ContainerStatuses[0]
			if cs.Image != image || cs.State.Running == nil {
				return false
			}
			if !cs.Ready {
				if podutil.IsPodReady(p) {
					t.Fatalf("pod Ready while its container is not: %+v", p.Status)
				}
				runningNotReady = &cs
				return false
			}
			return podutil.IsPodReady(p)
		})
		seen := time.Now()
		if runningNotReady == nil {
			t.Fatalf("%s: the container was ready as soon as it ran, want not ready for %ds", image, delay)
		}
		started := ready.Status.ContainerStatuses[0].State.Running.StartedAt.Time
		if due := started.Add(delay * time.Second); seen.Before(due) {
			t.Errorf("%s: ready at %s, before startedAt %s + %ds", image, seen.Format(time.RFC3339Nano), started, delay)
		}
		rv = ready.ResourceVersion
	}
}

// TestFakeNodeWaitsForStartupProbe starts a pod with a container whose
// startup probe has an initialDelaySeconds and whose readiness probe has a
// longer one, and another with a startup probe only, then updates both
// images in place, following the pod from a watch as a kubelet reports it:
// each time each container runs first neither started nor ready; it is
// started no sooner than its startedAt plus the startup probe's delay, and
// ready no sooner than the later of the two delays (the first is seen
// started and not ready in between); the pod is Ready only once both are.
func TestFakeNodeWaitsForStartupProbe(t *testing.T) {
	delays := map[string]struct{ startup, readiness int32 }{"slow": {2, 4}, "startup": {3, 0}}
	_, pods, ctx := fakeNodePods(t)
	probe := func(delay int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
			InitialDelaySeconds: delay, FailureThreshold: 30,
		}
	}
	var containers []corev1.Container
	for _, name := range []string{"slow", "startup"} {
		c := corev1.Container{Name: name, Image: name + ":1", StartupProbe: probe(delays[name].startup)}
		if d := delays[name].readiness; d > 0 {
			c.ReadinessProbe = probe(d)
		}
		containers = append(containers, c)
	}
	pod := createOnFakeNode(t, ctx, pods, "startup", corev1.PodSpec{Containers: containers})

	rv := ""
	for _, tag := range []string{":1", ":2"} {
		if tag != ":1" {
			rv = patchPod(t, ctx, pods, pod.Name, `{"spec":{"containers":[{"name":"slow","image":"slow:2"},{"name":"startup","image":"startup:2"}]}}`).ResourceVersion
		}
		type timeline struct {
			notStarted, startedNotReady bool
			started, ready              time.Time
		}
		seen := map[string]*timeline{"slow": {}, "startup": {}}
		final := waitPod(t, ctx, pods, pod.Name, rv, func(p *corev1.Pod) bool {
			now := time.Now()
			running := 0
			for _, cs := range p.Status.ContainerStatuses {
				tl := seen[cs.Name]
				if tl == nil || cs.Image != cs.Name+tag || cs.State.Running == nil {
					continue
				}
				running++
				started := cs.Started != nil && *cs.Started
				switch {
				case !started && cs.Ready:
					t.Fatalf("container %s ready before it is started: %+v", cs.Name, cs)
				case !started:
					tl.notStarted = true
				case !cs.Ready:
					tl.startedNotReady = true
				}
				if started && tl.started.IsZero() {
					tl.started = now
				}
				if cs.Ready && tl.ready.IsZero() {
					tl.ready = now
				}
			}
			allReady := running == 2 && !seen["slow"].ready.IsZero() && !seen["startup"].ready.IsZero()
			if podutil.IsPodReady(p) && !allReady {
				t.Fatalf("pod Ready while a container is not: %+v", p.Status.ContainerStatuses)
			}
			return allReady && podutil.IsPodReady(p)
		})
		for _, cs := range final.Status.ContainerStatuses {
			tl, d := seen[cs.Name], delays[cs.Name]
			startedAt := cs.State.Running.StartedAt.Time
			if !tl.notStarted {
				t.Errorf("%s%s: never seen running and not started", cs.Name, tag)
			}
			if due := startedAt.Add(time.Duration(d.startup) * time.Second); tl.started.Before(due) {
				t.Errorf("%s%s: started at %s, before startedAt %s + %ds", cs.Name, tag, tl.started.Format(time.RFC3339Nano), startedAt, d.startup)
			}
			if due := startedAt.Add(time.Duration(max(d.startup, d.readiness)) * time.Second); tl.ready.Before(due) {
				t.Errorf("%s%s: ready at %s, before startedAt %s + %ds", cs.Name, tag, tl.ready.Format(time.RFC3339Nano), startedAt, max(d.startup, d.readiness))
			}
			if cs.Name == "slow" && !tl.startedNotReady {
				t.Errorf("%s%s: never seen started and not ready", cs.Name, tag)
			}
		}
		rv = final.ResourceVersion
	}
}

// TestFakeNodeRunsPostStartHooks starts a pod whose container has a
// postStart hook that sleeps, beside one without a hook, then updates the
// hooked container's image in place, following the pod from a watch as a
// kubelet reports it: each time the hooked container waits
// ContainerCreating, with the pod not Ready, and runs on its new image,
// with the pod Ready, no sooner than the hook's seconds after the request that started
// it; its restartCount is 0 after the first start and 1 after the update,
// and the other container runs untouched throughout.
func TestFakeNodeRunsPostStartHooks(t *testing.T) {
	const hook = 3
	_, pods, ctx := fakeNodePods(t)
	requested := time.Now()
	pod := createOnFakeNode(t, ctx, pods, "hooked", corev1.PodSpec{Containers: []corev1.Container{
		{Name: "app", Image: "app:1", Lifecycle: &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: hook}}}},
		{Name: "other", Image: "other:1"},
	}})
	rv := ""
	for i, image := range []string{"app:1", "app:2"} {
		if i > 0 {
			requested = time.Now()
			rv = patchPod(t, ctx, pods, pod.Name, `{"spec":{"containers":[{"name":"app","image":"app:2"}]}}`).ResourceVersion
		}
		sawCreating := false
		running := waitPod(t, ctx, pods, pod.Name, rv, func(p *corev1.Pod) bool {
			if len(p.Status.ContainerStatuses) != 2 {
				return false
			}
			if other := containerStatus(t, p, "other"); other.State.Running == nil && sawCreating || other.RestartCount != 0 {
				t.Fatalf("container other stopped while app's hook ran: %+v", other)
			}
			if waitingReason(p, "app") == "ContainerCreating" {
				sawCreating = true
				if podutil.IsPodReady(p) {
					t.Fatalf("pod Ready while app's postStart hook runs: %+v", p.Status)
				}
				return false
			}
			app := containerStatus(t, p, "app")
			return sawCreating && app.Image == image && app.State.Running != nil && podutil.IsPodReady(p)
		})
		took := time.Since(requested)
		if took < hook*time.Second {
			t.Errorf("%s ran %s after the request, before its %ds postStart hook could return", image, took.Round(time.Millisecond), hook)
		}
		app := containerStatus(t, running, "app")
		if !app.Ready || app.RestartCount != int32(i) {
			t.Errorf("%s after its hook: ready %v, restartCount %d; want ready, %d", image, app.Ready, app.RestartCount, i)
		}
		rv = running.ResourceVersion
	}
}

// TestFakeNodeHonoursReadinessGates starts a pod with a readiness gate and
// follows it from a watch as a kubelet reports it: its containers ready but
// the pod not Ready (ReadinessGatesNotReady) while the gate's condition is
// missing; Ready once the condition is True; not Ready again, its
// containers still ready, once it is False; and after an in-place image
// update with the gate False, the container ready on the new image while
// the pod stays not Ready until the gate is True again.
func TestFakeNodeHonoursReadinessGates(t *testing.T) {
	const gate = "example.com/gate"
	_, pods, ctx := fakeNodePods(t)
	pod := createOnFakeNode(t, ctx, pods, "gated", corev1.PodSpec{
		Containers:     []corev1.Container{{Name: "app", Image: "app:1"}},
		ReadinessGates: []corev1.PodReadinessGate{{ConditionType: gate}},
	})
	setGate := func(status string) string {
		return patchPod(t, ctx, pods, pod.Name, `{"status":{"conditions":[{"type":"`+gate+`","status":"`+status+`"}]}}`, "status").ResourceVersion
	}
	containersReadyOn := func(p *corev1.Pod, image string) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].Ready && cs[0].Image == image
	}
	held := func(image string) func(p *corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			if !containersReadyOn(p, image) {
				return false
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					return c.Status == corev1.ConditionFalse && c.Reason == "ReadinessGatesNotReady"
				}
			}
			return false
		}
	}
	waitPod(t, ctx, pods, pod.Name, "", held("app:1"))
	waitPod(t, ctx, pods, pod.Name, setGate("True"), podutil.IsPodReady)
	waitPod(t, ctx, pods, pod.Name, setGate("False"), held("app:1"))
	rv := patchPod(t, ctx, pods, pod.Name, `{"spec":{"containers":[{"name":"app","image":"app:2"}]}}`).ResourceVersion
	waitPod(t, ctx, pods, pod.Name, rv, func(p *corev1.Pod) bool {
		if podutil.IsPodReady(p) {
			t.Fatalf("pod Ready during its update while its gate is False: %+v", p.Status)
		}
		return held("app:2")(p)
	})
	ready := waitPod(t, ctx, pods, pod.Name, setGate("True"), podutil.IsPodReady)
	if !containersReadyOn(ready, "app:2") {
		t.Errorf("pod Ready, want its container ready on app:2: %+v", ready.Status.ContainerStatuses)
	}
}
