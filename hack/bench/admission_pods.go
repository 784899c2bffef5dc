package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func benchSidecarSet(name, app string) *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: sidecarContainer()}},
		},
	}
}

// sidecarContainer is the container the SidecarSets inject.
func sidecarContainer() corev1.Container {
	return corev1.Container{
		Name: "log-agent", Image: "registry.example.com/logging/agent:1.0",
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
	}
}

func benchPod(ns, name string, withSidecar bool) *corev1.Pod {
	c := func(name string) corev1.Container {
		return corev1.Container{
			Name: name, Image: "registry.example.com/team/" + name + ":v1",
			Env:       []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")}},
		}
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "bench", "tier": "web"}},
		Spec: corev1.PodSpec{
			NodeName:                      admissionNode,
			Containers:                    []corev1.Container{c("app"), c("proxy")},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	if withSidecar {
		p.Spec.Containers = append(p.Spec.Containers, sidecarContainer())
	}
	return p
}

// probeInjection waits until the API server admits a dry-run pod exactly as
// variant v injects (injectionMismatch, the check every measured pod passes
// after its run), probeStreak times in a row. The variant before may still
// be in effect for a moment: the API server reads its webhook
// configurations and admission policies from informers, and the manager its
// SidecarSets; a probe that looked only for the new variant's injection
// passed while the previous variant's webhook still added its record too,
// and measured pods carried both.
func probeInjection(ctx context.Context, e *env, ns string, v admVariant, null *nullWebhook) error {
	want := 3
	if v == admNone || v == admNull {
		want = 2
	}
	nullOn := v == admNull || v == admNullInj
	var got, streak int
	var mismatch string
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		p := benchPod(ns, "probe", v == admPre)
		calls := null.calls.Load()
		if lastErr = e.c.Create(ctx, p, client.DryRunAll); lastErr != nil {
			streak = 0
			return false, nil
		}
		got = len(p.Spec.Containers)
		mismatch = injectionMismatch(v, p)
		if got != want || mismatch != "" || (null.calls.Load() > calls) != nullOn {
			streak = 0
			return false, nil
		}
		streak++
		return streak >= probeStreak, nil
	})
	if err != nil {
		if lastErr != nil { // the probe never got an answer it could count
			return fmt.Errorf("probe pod: dry-run create refused (%v): %w", lastErr, err)
		}
		return fmt.Errorf("probe pod has %d containers, want %d (%s): %w", got, want, mismatch, err)
	}
	return nil
}

// probeStreak is how many dry-run probes in a row must be admitted as the
// variant injects before its pods are measured.
const probeStreak = 3

// createPods creates n pods with w concurrent clients and returns each
// create's latency and the wall time.
func createPods(ctx context.Context, e *env, ns string, n, w int, withSidecar bool) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	var mu sync.Mutex
	var failures int
	start := time.Now()
	err := runWorkers(n, w, func(i int) error {
		p := benchPod(ns, fmt.Sprintf("pod-%05d", i), withSidecar)
		t := time.Now()
		_, err := e.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		lat[i] = time.Since(t)
		if err != nil {
			mu.Lock()
			failures++
			mu.Unlock()
			return err
		}
		return nil
	})
	elapsed := time.Since(start)
	if err != nil {
		return nil, 0, fmt.Errorf("%d creates failed, first: %w", failures, err)
	}
	return lat, elapsed, nil
}
