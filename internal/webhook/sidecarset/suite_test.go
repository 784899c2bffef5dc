package sidecarset_test

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	sidecarsetctrl "github.com/deckhand-dev/deckhand/internal/controller/sidecarset"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

var env *testenv.Env

// The suite's --sidecarset-pod-label-allowlist and
// --sidecarset-pod-metadata-allowlist.
var (
	testLabelAllowlist    = mustAllowlist("example.com/*")
	testMetadataAllowlist = mustAllowlist("example.com/*", "team.io/owner")
)

func mustAllowlist(patterns ...string) sidecarcontrol.MetadataAllowlist {
	a, err := sidecarcontrol.ParseMetadataAllowlist(patterns)
	if err != nil {
		panic(err)
	}
	return a
}

// The webhook tests need the API server only: no scheduler, no kubelet.
// `go test -run '^$' -bench BenchmarkInject` runs no test, so it starts no
// control plane either.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "^$" {
		os.Exit(m.Run())
	}
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Setup: func(mgr ctrl.Manager) error {
			if err := (&sidecarsetctrl.Reconciler{}).SetupWithManager(mgr); err != nil {
				return err
			}
			_, err := testenv.SidecarSetWebhooks(mgr, sidecarcontrol.Options{
				PodMetadata: sidecarcontrol.PodMetadataAllowlists{Annotations: testMetadataAllowlist, Labels: testLabelAllowlist},
				Revisions:   mgr,
			})
			return err
		},
	}))
}

// ctxT bounds a test's requests to the admission webhook by a minute.
func ctxT(t *testing.T) context.Context { return testutil.Context(t, 60*time.Second) }

func sidecar(name, image string) deckhandv1alpha1.SidecarContainer {
	return deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: name, Image: image}}
}

// newSidecarSet returns a SidecarSet limited to namespace ns (so that tests
// never overlap) selecting app=<app>.
func newSidecarSet(name, ns, app string, containers ...deckhandv1alpha1.SidecarContainer) *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Namespace:  ns,
			Containers: containers,
		},
	}
}

// createSidecarSet creates s, deletes it when the test ends, and waits until
// the manager's cache (which the pod webhook reads) has it.
func createSidecarSet(t *testing.T, s *deckhandv1alpha1.SidecarSet) *deckhandv1alpha1.SidecarSet {
	t.Helper()
	ctx := ctxT(t)
	if err := env.Client.Create(ctx, s); err != nil {
		t.Fatalf("creating SidecarSet %s: %v", s.Name, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), s) })
	waitCached(t, s)
	return s
}

// waitCached waits until the manager's cache shows s at its generation.
func waitCached(t *testing.T, s *deckhandv1alpha1.SidecarSet) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		got := &deckhandv1alpha1.SidecarSet{}
		if err := env.Manager().GetCache().Get(ctx, types.NamespacedName{Name: s.Name}, got); err != nil {
			return false, err
		}
		return got.Generation >= s.Generation, nil
	}, "the manager's cache has SidecarSet %s at generation %d", s.Name, s.Generation)
}

func updateSidecarSet(t *testing.T, name string, mutate func(*deckhandv1alpha1.SidecarSet)) *deckhandv1alpha1.SidecarSet {
	t.Helper()
	s := &deckhandv1alpha1.SidecarSet{}
	if err := tryUpdateSidecarSet(t, name, func(cur *deckhandv1alpha1.SidecarSet) { mutate(cur); s = cur }); err != nil {
		t.Fatalf("updating SidecarSet %s: %v", name, err)
	}
	waitCached(t, s)
	return s
}

// tryUpdateSidecarSet applies mutate to the current SidecarSet name and
// returns the update's answer. The controller writes the status meanwhile:
// a conflict is read again and retried, so the answer is the webhook's or
// the schema's, never a stale read's.
func tryUpdateSidecarSet(t *testing.T, name string, mutate func(*deckhandv1alpha1.SidecarSet)) error {
	t.Helper()
	ctx := ctxT(t)
	for {
		s := testutil.Get(ctx, t, env.Client, types.NamespacedName{Name: name}, &deckhandv1alpha1.SidecarSet{})
		mutate(s)
		if err := env.Client.Update(ctx, s); !apierrors.IsConflict(err) {
			return err
		}
	}
}

func newPod(ns, name string, labels map[string]string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "app:1"})
	}
	return p
}

// createPod creates p and returns the pod as the API server stored it
// (after admission).
func createPod(t *testing.T, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	if err := env.Client.Create(ctxT(t), p); err != nil {
		t.Fatalf("creating pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	return p
}

func names(cs []corev1.Container) []string {
	out := make([]string, len(cs))
	for i := range cs {
		out[i] = cs[i].Name
	}
	return out
}

// wantRefused creates s and fails t unless the API server refuses it as
// Invalid with a message naming field and containing words.
func wantRefused(t *testing.T, s *deckhandv1alpha1.SidecarSet, field, words string) {
	t.Helper()
	err := env.Client.Create(ctxT(t), s)
	if err == nil {
		_ = env.Client.Delete(ctxT(t), s)
		t.Fatal("created an invalid SidecarSet")
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("error is not Invalid: %v", err)
	}
	if !strings.Contains(err.Error(), field) || !strings.Contains(err.Error(), words) {
		t.Errorf("error does not name %q (with %q): %v", field, words, err)
	}
}
