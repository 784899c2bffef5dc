// Package rolloutwatch_test runs `kubectl deckhand status --watch` on
// PodSets that Deckhand's PodSet controller manages, in an in-process
// manager against a real kube-apiserver and etcd. With no scheduler and no
// kubelet, pods stay Pending unless a test marks them ready as a kubelet
// would.
package rolloutwatch_test

import (
	"context"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/kubectlplugin"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Setup: func(mgr ctrl.Manager) error { return (&podset.Reconciler{}).SetupWithManager(mgr) },
	}))
}

// watchPodSet runs `kubectl deckhand status pset NAME --watch` with the
// timeout given and returns its exit code and error.
func watchPodSet(ctx context.Context, t *testing.T, ps *deckhandv1alpha1.PodSet, timeout string) (int, error) {
	var out strings.Builder
	root := kubectlplugin.NewRootCommand(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	root.SetArgs([]string{"--kubeconfig", env.Cluster.KubeconfigPath, "status", "pset", ps.Name, "-n", ps.Namespace, "--watch", "--timeout", timeout})
	err := root.ExecuteContext(ctx)
	t.Logf("status --watch: %v\n%s", err, out.String())
	return kubectlplugin.ExitCode(err), err
}

// createPodSet creates, in a namespace of the test's own, a PodSet of
// replicas pods with the progress deadline given.
func createPodSet(ctx context.Context, t *testing.T, replicas int32, deadline *int32) *deckhandv1alpha1.PodSet {
	t.Helper()
	ps := testutil.PodSet(env.Namespace(t), "web", replicas, map[string]string{"app": "web"}, corev1.Container{Name: "app", Image: "registry.k8s.io/pause:3.10"})
	ps.Spec.ProgressDeadlineSeconds = deadline
	testutil.Create(ctx, t, env.Client, ps)
	return ps
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
