package main

// The smoke check: one Kruise SidecarSet injects a sidecar and rolls an image
// change out in place on the local cluster's fake node (`-only kruise-smoke`).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

func kruiseNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{kruiseNamespaceLabel: kruiseVariant}}}
	_, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	return err
}

// kruiseSidecarSet is an apps.kruise.io/v1alpha1 SidecarSet injecting
// container into the pods labelled app=app of every namespace whose pods
// reach Kruise's webhook, rolling image changes out maxUnavailable pods at a
// time (unstructured: the bench does not compile Kruise's API).
func kruiseSidecarSet(name, app string, container corev1.Container, maxUnavailable intstr.IntOrString) (*unstructured.Unstructured, error) {
	c, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&container)
	if err != nil {
		return nil, err
	}
	var mu any = maxUnavailable.String() // a percentage
	if maxUnavailable.Type == intstr.Int {
		mu = int64(maxUnavailable.IntValue())
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps.kruise.io/v1alpha1",
		"kind":       "SidecarSet",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{
			"selector":       map[string]any{"matchLabels": map[string]any{"app": app}},
			"containers":     []any{c},
			"updateStrategy": map[string]any{"type": "RollingUpdate", "maxUnavailable": mu},
		},
	}}, nil
}

// setSidecarImage changes the image of the first sidecar container of a
// SidecarSet, Deckhand's or Kruise's alike (both keep it at
// spec.containers[0].image), retrying on conflict: the controller writes the
// status meanwhile.
func setSidecarImage(ctx context.Context, c client.Client, ss *unstructured.Unstructured, image string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ss), ss); err != nil {
			return err
		}
		containers, _, _ := unstructured.NestedSlice(ss.Object, "spec", "containers")
		if len(containers) == 0 {
			return fmt.Errorf("SidecarSet %s has no containers", ss.GetName())
		}
		containers[0].(map[string]any)["image"] = image
		if err := unstructured.SetNestedSlice(ss.Object, containers, "spec", "containers"); err != nil {
			return err
		}
		return c.Update(ctx, ss)
	})
}

// ---- smoke check: `go run ./hack/bench -only kruise-smoke` ----

// kruiseSmoke starts a cluster with one fake node and kruise-manager, and
// checks the two things the benchmarks will compare: a SidecarSet injects
// its container into a new pod, and a new sidecar image reaches the running
// pod in place (the fake node restarts the container, as a kubelet does).
func kruiseSmoke(ctx context.Context, cfg *config, r *report) error {
	opts := localcluster.Full(1)
	opts.BinDir = cfg.k8sBin
	t0 := time.Now()
	cl, err := localcluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer cl.Stop()
	logf("[kruise] cluster ready in %s", secs(time.Since(t0)))
	c, err := client.New(cl.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	cs := cl.Clientset()
	k, err := startKruise(ctx, cl, kruiseOptions{dir: kruiseDir(cfg), qps: 20, burst: 30, workers: kruiseSidecarSetWorkers})
	if err != nil {
		return err
	}
	defer k.stop()
	logf("[kruise] webhook serving %s after start, SidecarSet workers running after %s", secs(k.serving), secs(k.working))
	rss, _ := rssBytes(k.pid())

	const ns, app = "kruise-smoke", "kruise-smoke"
	if err := kruiseNamespace(ctx, cs, ns); err != nil {
		return err
	}
	sidecar := sidecarContainer()
	ss, err := kruiseSidecarSet("smoke", app, sidecar, intstr.FromInt32(1))
	if err != nil {
		return err
	}
	t1 := time.Now()
	if err := c.Create(ctx, ss); err != nil {
		return fmt.Errorf("creating the SidecarSet: %w", err)
	}
	// The webhook reads SidecarSets from its informer: a server-side dry run
	// shows when the new one is seen, without leaving a pod behind.
	var injecting time.Duration
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p := kruiseSmokePod(ns, "probe", app)
		if err := c.Create(ctx, p, client.DryRunAll); err != nil {
			return false, nil
		}
		injecting = time.Since(t1)
		return sidecarImage(p.Spec.Containers, sidecar.Name) == sidecar.Image, nil
	})
	if err != nil {
		return fmt.Errorf("a pod created after the SidecarSet never got the sidecar: %w", err)
	}
	// The SidecarSet selects the same pods in every namespace, but only the
	// labelled ones reach Kruise.
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns + "-unlabelled"}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, other, metav1.CreateOptions{}); err != nil {
		return err
	}
	outside := kruiseSmokePod(other.Name, "probe", app)
	if err := c.Create(ctx, outside, client.DryRunAll); err != nil {
		return err
	}
	if sidecarImage(outside.Spec.Containers, sidecar.Name) != "" {
		return fmt.Errorf("kruise injected into namespace %s, which is not labelled %s=%s", other.Name, kruiseNamespaceLabel, kruiseVariant)
	}

	pod := kruiseSmokePod(ns, "app-0", app)
	t2 := time.Now()
	if err := c.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating the pod: %w", err)
	}
	createLatency := time.Since(t2)
	if got := sidecarImage(pod.Spec.Containers, sidecar.Name); got != sidecar.Image {
		return fmt.Errorf("pod created without the sidecar (image %q, containers %v)", got, containerNames(pod.Spec.Containers))
	}
	uid := pod.UID
	ready, err := waitPod(ctx, c, ns, pod.Name, t2, "Ready", podutil.IsPodReady)
	if err != nil {
		return err
	}

	// In-place update: a new sidecar image.
	const newImage = "registry.example.com/logging/agent:2.0"
	t3 := time.Now()
	err = setSidecarImage(ctx, c, ss, newImage)
	if err != nil {
		return fmt.Errorf("changing the sidecar image: %w", err)
	}
	specUpdated, err := waitPod(ctx, c, ns, pod.Name, t3, "the new image in the pod's spec", func(p *corev1.Pod) bool {
		return sidecarImage(p.Spec.Containers, sidecar.Name) == newImage
	})
	if err != nil {
		return err
	}
	running, err := waitPod(ctx, c, ns, pod.Name, t3, "the sidecar running the new image, pod Ready", func(p *corev1.Pod) bool {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == sidecar.Name {
				return s.Image == newImage && s.Ready && s.RestartCount == 1 && podutil.IsPodReady(p)
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		return err
	}
	if pod.UID != uid {
		return errors.New("the pod was recreated, not updated in place")
	}
	var statusDone time.Duration
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ss), ss); err != nil {
			return false, nil
		}
		gen := ss.GetGeneration()
		observed, _, _ := unstructured.NestedInt64(ss.Object, "status", "observedGeneration")
		updatedReady, _, _ := unstructured.NestedInt64(ss.Object, "status", "updatedReadyPods")
		statusDone = time.Since(t3)
		return observed == gen && updatedReady == 1, nil
	})
	if err != nil {
		status, _, _ := unstructured.NestedMap(ss.Object, "status")
		return fmt.Errorf("SidecarSet status never counted the updated pod (status %v): %w", status, err)
	}

	errs := k.errorLines()
	for i, line := range errs {
		if i == 5 {
			logf("[kruise] ... %d more error lines in %s", len(errs)-i, k.logPath)
			break
		}
		logf("[kruise] kruise-manager error: %s", line)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "kruise-manager %s (`bin/kruise/.versions`), SidecarSet workers %d, client QPS 20/burst 30, feature gates `%s`; one kwok fake node.\n\n",
		kruiseVersion(cfg), kruiseSidecarSetWorkers, strings.Join(kruiseFeatureGates, ","))
	b.WriteString("| step | time |\n|---|---|\n")
	fmt.Fprintf(&b, "| process start → webhook serving (/readyz) | %s |\n", secs(k.serving))
	fmt.Fprintf(&b, "| process start → SidecarSet controller's workers running | %s |\n", secs(k.working))
	fmt.Fprintf(&b, "| SidecarSet created → injected into a dry-run pod | %s |\n", ms(injecting))
	fmt.Fprintf(&b, "| pod create (through Kruise's webhook) | %s |\n", ms(createLatency))
	fmt.Fprintf(&b, "| pod create → Ready | %s |\n", ms(ready))
	fmt.Fprintf(&b, "| image changed → new image in the pod's spec | %s |\n", ms(specUpdated))
	fmt.Fprintf(&b, "| image changed → sidecar running it, pod Ready (same pod, restartCount 1) | %s |\n", ms(running))
	fmt.Fprintf(&b, "| image changed → SidecarSet status updatedReadyPods 1 | %s |\n", ms(statusDone))
	fmt.Fprintf(&b, "\nkruise-manager RSS after start: %.0f MiB; %d lines logged at error level.\n", mib(float64(rss)), len(errs))
	r.section("Kruise smoke check", b.String())
	logf("[kruise] smoke passed: injected %s after the SidecarSet; in place %s (spec %s, status %s)", ms(injecting), ms(running), ms(specUpdated), ms(statusDone))
	return nil
}

func kruiseVersion(cfg *config) string {
	data, err := os.ReadFile(filepath.Join(kruiseDir(cfg), ".versions"))
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(data))
}

func kruiseSmokePod(ns, name, app string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "app", Image: "registry.example.com/team/app:v1"}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

func sidecarImage(cs []corev1.Container, name string) string {
	for _, c := range cs {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

func containerNames(cs []corev1.Container) []string {
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	return names
}

// waitPod polls one pod until cond holds and returns the time since start.
func waitPod(ctx context.Context, c client.Client, ns, name string, start time.Time, what string, cond func(*corev1.Pod) bool) (time.Duration, error) {
	p := &corev1.Pod{}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return false, nil
		}
		return cond(p), nil
	})
	if err != nil {
		return 0, fmt.Errorf("waiting for %s of pod %s/%s: %w (status %+v)", what, ns, name, err, p.Status.ContainerStatuses)
	}
	return time.Since(start), nil
}
