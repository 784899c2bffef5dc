package sidecarpolicy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestPolicyModeInitContainerChangeReachesNewPodsOnly: in Policy mode as in
// Webhook mode, a change of a plain init container's image reaches the pods
// created afterwards (through the recompiled policy) while the pods already
// there keep their spec and record and count as updated.
func TestPolicyModeInitContainerChangeReachesNewPodsOnly(t *testing.T) {
	ns := env.Namespace(t)
	ctx := ctxT(t)
	s := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "init-" + ns[len(ns)-5:]},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace:      ns,
			Selector:       &metav1.LabelSelector{MatchLabels: web},
			InjectionMode:  deckhandv1alpha1.PolicyInjection,
			InitContainers: []deckhandv1alpha1.SidecarContainer{sc("setup", "setup:1", "")},
		},
	}
	createSidecarSet(t, s)
	waitPolicyReady(t, s.Name)
	eventuallyInjectsInit(t, ns, "setup:1")
	old := createWebPod(t, ns, "old")
	if img := initImageOf(old, "setup"); img != "setup:1" {
		t.Fatalf("pod old got setup image %q, want setup:1", img)
	}
	first, _ := sidecarcontrol.ReadPodRecord(old.Annotations).Revisions(s.Name)
	waitSetStatus(t, s.Name, "1 pod matched and updated", func(st deckhandv1alpha1.SidecarSetStatus) bool {
		return st.LatestRevision == first && st.MatchedPods == 1 && st.UpdatedPods == 1
	})

	updateSidecarSet(t, s.Name, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.InitContainers[0].Image = "setup:2" })
	waitPolicyReady(t, s.Name)
	eventuallyInjectsInit(t, ns, "setup:2")
	fresh := createWebPod(t, ns, "fresh")
	second, _ := sidecarcontrol.ReadPodRecord(fresh.Annotations).Revisions(s.Name)
	if img := initImageOf(fresh, "setup"); img != "setup:2" || second == first {
		t.Fatalf("pod fresh got setup image %q at revision %s, want setup:2 at a new revision", img, second)
	}
	// The status counts the new pod after the reconcile that saw the change:
	// any patch of the old pod would have been written by then.
	waitSetStatus(t, s.Name, "2 pods matched and updated at the new revision", func(st deckhandv1alpha1.SidecarSetStatus) bool {
		return st.LatestRevision == second && st.MatchedPods == 2 && st.UpdatedPods == 2 && st.NotUpdatablePods == 0
	})
	got := &corev1.Pod{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "old"}, got); err != nil {
		t.Fatal(err)
	}
	if img := initImageOf(got, "setup"); img != "setup:1" {
		t.Errorf("pod old: setup image %s, want setup:1 (a plain init container is never patched in place)", img)
	}
	if rev, _ := sidecarcontrol.ReadPodRecord(got.Annotations).Revisions(s.Name); rev != first {
		t.Errorf("pod old records revision %s, want its own %s", rev, first)
	}
}

func createWebPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := createPod(ctxT(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: web},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}, false)
	if err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	return p
}

func initImageOf(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// eventuallyInjectsInit waits until a dry-run web pod gets the setup init
// container at image.
func eventuallyInjectsInit(t *testing.T, ns, image string) {
	t.Helper()
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		got, err := createPod(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe", Labels: web},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}, true)
		if err != nil {
			return false, err
		}
		return initImageOf(got, "setup") == image, nil
	}, "new pods in %s get the setup init container at image %q", ns, image)
}

func waitSetStatus(t *testing.T, name, what string, ok func(deckhandv1alpha1.SidecarSetStatus) bool) {
	t.Helper()
	var last deckhandv1alpha1.SidecarSetStatus
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		s := &deckhandv1alpha1.SidecarSet{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, s); err != nil {
			return false, err
		}
		last = s.Status
		return ok(s.Status), nil
	}, "SidecarSet %s: %s (last status: %s)", name, what, lazy(func() string { return fmt.Sprintf("%+v", last) }))
}
