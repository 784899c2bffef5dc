package sidecarpolicy_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/sidecarpolicy"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// policySet is a Policy-mode SidecarSet that injects a log sidecar at image
// into the web pods of ns.
func policySet(name, ns, image string) *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace:     ns,
			Selector:      &metav1.LabelSelector{MatchLabels: web},
			InjectionMode: deckhandv1alpha1.PolicyInjection,
			Containers:    []deckhandv1alpha1.SidecarContainer{sc("log", image, "")},
		},
	}
}

// createSidecarSet creates s and deletes it when the test ends.
func createSidecarSet(t *testing.T, s *deckhandv1alpha1.SidecarSet) {
	t.Helper()
	if err := env.Client.Create(ctxT(t), s); err != nil {
		t.Fatalf("creating SidecarSet %s: %v", s.Name, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), s) })
}

// updateSidecarSet applies mutate to SidecarSet name and returns the new
// generation. A merge patch carries no resourceVersion, so the status
// writes of the controllers meanwhile cannot make it conflict.
func updateSidecarSet(t *testing.T, name string, mutate func(*deckhandv1alpha1.SidecarSet)) int64 {
	t.Helper()
	ctx := ctxT(t)
	s := testutil.Get(ctx, t, env.Client, types.NamespacedName{Name: name}, &deckhandv1alpha1.SidecarSet{})
	base := s.DeepCopy()
	mutate(s)
	if err := env.Client.Patch(ctx, s, client.MergeFrom(base)); err != nil {
		t.Fatalf("updating SidecarSet %s: %v", name, err)
	}
	return s.Generation
}

// waitSidecarSet waits until SidecarSet name, as the API server has it,
// passes ok, and returns it.
func waitSidecarSet(t *testing.T, timeout time.Duration, name, what string, ok func(*deckhandv1alpha1.SidecarSet) bool) *deckhandv1alpha1.SidecarSet {
	t.Helper()
	var last *deckhandv1alpha1.SidecarSet
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		s := &deckhandv1alpha1.SidecarSet{}
		if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, s); err != nil {
			return false, err
		}
		last = s
		return ok(s), nil
	}, "SidecarSet %s: %s (last: %s)", name, what, lazy(func() string {
		if last == nil {
			return "not read"
		}
		return fmt.Sprintf("generation %d, status %+v", last.Generation, last.Status)
	}))
	return last
}

// waitCached waits until the manager's cache (which the pod webhook reads)
// shows SidecarSet name at generation gen or later.
func waitCached(t *testing.T, name string, gen int64) {
	t.Helper()
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		got := &deckhandv1alpha1.SidecarSet{}
		if err := env.Manager().GetCache().Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return got.Generation >= gen, nil
	}, "the manager's cache has SidecarSet %s at generation %d", name, gen)
}

// waitPolicyReady waits until SidecarSet name reports its policy in place
// for its current generation, and that the policy exists.
func waitPolicyReady(t *testing.T, name string) {
	t.Helper()
	waitSidecarSet(t, 2*time.Minute, name, "reports InjectionPolicyReady=True for its generation", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := meta.FindStatusCondition(s.Status.Conditions, deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition)
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == s.Generation
	})
	p := &admissionregistrationv1.MutatingAdmissionPolicy{}
	if err := env.Client.Get(ctxT(t), types.NamespacedName{Name: sidecarpolicy.Name(name)}, p); err != nil {
		t.Fatalf("the policy of %s: %v", name, err)
	}
}

func getPolicy(ctx context.Context, name string) (*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	p := &admissionregistrationv1.MutatingAdmissionPolicy{}
	b := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: sidecarpolicy.Name(name)}, p); err != nil {
		return nil, nil, err
	}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: sidecarpolicy.Name(name)}, b); err != nil {
		return p, nil, err
	}
	return p, b, nil
}

func waitPolicyGone(t *testing.T, name string) {
	t.Helper()
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, _, err := getPolicy(ctx, name)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}, "the policy and binding of %s are gone", name)
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, types.NamespacedName{Name: sidecarpolicy.Name(name)}, &admissionregistrationv1.MutatingAdmissionPolicyBinding{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}, "the binding of %s is gone", name)
}

// webPod is a pod named name in ns that the web selector matches.
func webPod(ns, name string) *corev1.Pod {
	p := pod(web, nil)
	p.Namespace, p.Name = ns, name
	return p
}

// createPod creates p (dry-run if asked) and returns what the API server
// stored (or would store).
func createPod(ctx context.Context, p *corev1.Pod, dryRun bool) (*corev1.Pod, error) {
	p = p.DeepCopy()
	var opts []client.CreateOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	err := env.Client.Create(ctx, p, opts...)
	return p, err
}

func createWebPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := createPod(ctxT(t), webPod(ns, name), false)
	if err != nil {
		t.Fatalf("creating pod %s: %v", name, err)
	}
	return p
}

// getPod returns pod ns/name as the API server has it now.
func getPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p := testutil.Get(ctxT(t), t, env.Client, types.NamespacedName{Namespace: ns, Name: name}, &corev1.Pod{})
	return p
}

// logImage is the image of p's log sidecar ("" when it has none).
func logImage(p *corev1.Pod) string { return imageOf(p.Spec.Containers, "log") }

// setupImage is the image of p's setup init container ("" when it has none).
func setupImage(p *corev1.Pod) string { return imageOf(p.Spec.InitContainers, "setup") }

func imageOf(list []corev1.Container, name string) string {
	if c := podutil.FindContainer(list, name); c != nil {
		return c.Image
	}
	return ""
}

// podImage creates a web pod and returns what injected shows of it.
func podImage(t *testing.T, ns, name string) (image, revision string) {
	t.Helper()
	return injected(createWebPod(t, ns, name))
}

// injected returns the image of p's log sidecar ("" when it has none) and
// the revision its record shows.
func injected(p *corev1.Pod) (image, revision string) {
	rec := sidecarcontrol.ReadPodRecord(p.Annotations)
	for _, n := range rec.Names() {
		revision, _ = rec.Revisions(n)
	}
	return logImage(p), revision
}

// eventuallyInjects waits until a dry-run web pod in ns shows image where
// imageOf looks (the API server picks a changed policy up within about a
// second).
func eventuallyInjects(t *testing.T, ns string, imageOf func(*corev1.Pod) string, image string) {
	t.Helper()
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		got, err := createPod(ctx, webPod(ns, "probe"), true)
		if err != nil {
			return false, err
		}
		return imageOf(got) == image, nil
	}, "new pods in %s get image %q", ns, image)
}

// lazy is a message part computed when the message is printed.
type lazy func() string

func (l lazy) String() string { return l() }
