package rolloutwatch_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/kubectlplugin"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// watchPodSet runs `kubectl deckhand status pset NAME --watch` with the
// timeout given and returns its exit code and error.
func watchPodSet(ctx context.Context, t *testing.T, ps *deckhandv1alpha1.PodSet, timeout string) (int, error) {
	var out bytes.Buffer
	root := kubectlplugin.NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	root.SetArgs([]string{"--kubeconfig", env.Cluster.KubeconfigPath, "status", "pset", ps.Name, "-n", ps.Namespace, "--watch", "--timeout", timeout})
	err := root.ExecuteContext(ctx)
	t.Logf("status --watch: %v\n%s", err, out.String())
	return kubectlplugin.ExitCode(err), err
}

func createPodSet(ctx context.Context, t *testing.T, replicas int32, deadline *int32) *deckhandv1alpha1.PodSet {
	t.Helper()
	ps := testutil.PodSet(env.Namespace(t), "web", replicas, map[string]string{"app": "web"}, corev1.Container{Name: "app", Image: "registry.k8s.io/pause:3.10"})
	ps.Spec.ProgressDeadlineSeconds = deadline
	testutil.Create(ctx, t, env.Client, ps)
	return ps
}

// TestStatusWatchPodSet: a PodSet whose pods cannot become ready and whose
// progress deadline is short fails (exit 1) once the controller reports
// ProgressDeadlineExceeded; one whose pods a kubelet would report ready is
// done (exit 0); one whose pods stay pending, without a deadline, times out
// (exit 2).
func TestStatusWatchPodSet(t *testing.T) {
	ctx := testutil.Context(t, 3*time.Minute)

	t.Run("pods never ready, progress deadline 2s: failed", func(t *testing.T) {
		ps := createPodSet(ctx, t, 1, ptr.To[int32](2))
		code, err := watchPodSet(ctx, t, ps, "30s")
		if code != kubectlplugin.ExitFailed || !strings.Contains(err.Error(), "ProgressDeadlineExceeded") {
			t.Fatalf("exit %d (%v), want %d with ProgressDeadlineExceeded", code, err, kubectlplugin.ExitFailed)
		}
	})

	t.Run("pods ready: done", func(t *testing.T) {
		ps := createPodSet(ctx, t, 2, nil)
		exit := make(chan int, 1)
		go func() {
			code, _ := watchPodSet(ctx, t, ps, "90s")
			exit <- code
		}()
		testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
			return markPodsReady(ctx, ps.Namespace, 2)
		}, "the PodSet's 2 pods are created and marked ready")
		if code := <-exit; code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
	})

	t.Run("pods pending, no deadline: timed out", func(t *testing.T) {
		ps := createPodSet(ctx, t, 1, nil)
		if code, err := watchPodSet(ctx, t, ps, "3s"); code != kubectlplugin.ExitTimedOut {
			t.Fatalf("exit %d (%v), want %d", code, err, kubectlplugin.ExitTimedOut)
		}
	})
}

// markPodsReady writes, as a kubelet would, a running and ready status on
// every pod of ns, and reports whether there are want of them.
func markPodsReady(ctx context.Context, ns string, want int) (bool, error) {
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return false, err
	}
	now := metav1.Now()
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning {
			continue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
		for _, c := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image, Ready: true,
				Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
		}
		if err := env.Client.Status().Update(ctx, p); err != nil {
			return false, err
		}
	}
	return len(pods.Items) == want, nil
}
