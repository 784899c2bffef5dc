package localcluster

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

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
			patch := `{"spec":{"containers":[{"name":"slow","image":"slow:2"},{"name":"startup","image":"startup:2"}]}}`
			patched, err := pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rv = patched.ResourceVersion
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
