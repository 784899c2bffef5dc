package sidecarset_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestSample applies config/samples/apps_v1alpha1_sidecarset.yaml as
// `make run` does and checks that the Deployment's pods get the sidecar with
// the app's volume and env.
func TestSample(t *testing.T) {
	root, err := localcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if err := localcluster.ApplyManifests(ctxT(t), env.Config, "deckhand-samples", filepath.Join(root, "config", "samples", "apps_v1alpha1_sidecarset.yaml")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = env.Client.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sidecar-demo"}})
		_ = env.Client.Delete(ctx, &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "log-shipper"}})
	})
	testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		s, err := getSidecarSet(ctx, "log-shipper")
		if err != nil {
			return false, err
		}
		// Pods the Deployment created before the webhook's cache had the
		// SidecarSet would show up here as not injected.
		if s.Status.NotInjectedPods != 0 {
			return false, fmt.Errorf("%d pods not injected", s.Status.NotInjectedPods)
		}
		return s.Status.MatchedPods == 2 && s.Status.ReadyPods == 2 && s.Status.UpdatedPods == 2, nil
	}, "the sample Deployment's 2 pods carry the ready log-shipper sidecar")
	pods, err := listPods(ctxT(t), "default")
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		p := &pods[i]
		if p.Labels["app"] != "sidecar-demo" {
			continue
		}
		var shipper *corev1.Container
		for j := range p.Spec.Containers {
			if p.Spec.Containers[j].Name == "log-shipper" {
				shipper = &p.Spec.Containers[j]
			}
		}
		if shipper == nil || p.Spec.Containers[0].Name != "app" {
			t.Fatalf("pod %s containers: %v", p.Name, p.Spec.Containers)
		}
		hasLogs, hasEnv := false, false
		for _, m := range shipper.VolumeMounts {
			hasLogs = hasLogs || (m.Name == "logs" && m.MountPath == "/var/log/app")
		}
		for _, e := range shipper.Env {
			hasEnv = hasEnv || (e.Name == "APP_NAME" && e.Value == "sidecar-demo")
		}
		if !hasLogs || !hasEnv {
			t.Errorf("pod %s: log-shipper mounts %v env %v", p.Name, shipper.VolumeMounts, shipper.Env)
		}
	}
}
