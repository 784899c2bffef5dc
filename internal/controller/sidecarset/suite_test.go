package sidecarset_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	sidecarsetctrl "github.com/deckhand-dev/deckhand/internal/controller/sidecarset"
	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	sidecarsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/sidecarset"
)

var env *testenv.Env

// expectClock is the clock of the controller's expectations: real time
// plus an offset a test can move forward, so that a test can let the TTL
// pass without waiting for it while every other test sees real time.
var expectClock = &offsetClock{}

// updateExpectations are the running controller's expectations, so that a
// test can raise one the cache will never confirm. Each manager start gets
// new ones, as a restarted process would.
var updateExpectations *expectations.Expectations

type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *offsetClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// The controller tests run a full cluster: kube-controller-manager (for
// Deployments), the scheduler and kwok, which makes scheduled pods Running
// and Ready.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Full: true,
		Setup: func(mgr ctrl.Manager) error {
			updateExpectations = expectations.New(expectations.WithClock(expectClock))
			// One Lister for the controller and the webhook, as operator.Setup wires them.
			lister, err := sidecarcontrol.ListerFromCache(context.Background(), mgr.GetCache())
			if err != nil {
				return err
			}
			if err := (&sidecarsetctrl.Reconciler{Expectations: updateExpectations, Lister: lister}).SetupWithManager(mgr); err != nil {
				return err
			}
			return sidecarsetwebhook.SetupWebhookWithLister(mgr, lister)
		},
	}))
}

// ctxT bounds a test's requests by two minutes.
func ctxT(t *testing.T) context.Context { return testutil.Context(t, 2*time.Minute) }

func newSidecarSet(name, ns, app string, image string) *deckhandv1alpha1.SidecarSet {
	return &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Namespace:  ns,
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: image}}},
		},
	}
}

// createSidecarSet creates s and waits until the manager's cache (which the
// pod webhook reads) has it.
func createSidecarSet(t *testing.T, s *deckhandv1alpha1.SidecarSet) {
	t.Helper()
	if err := env.Client.Create(ctxT(t), s); err != nil {
		t.Fatalf("creating SidecarSet %s: %v", s.Name, err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), s) })
	waitCached(t, s.Name, s.Generation)
}

func waitCached(t *testing.T, name string, generation int64) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		got := &deckhandv1alpha1.SidecarSet{}
		if err := env.Manager().GetCache().Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			return false, err
		}
		return got.Generation >= generation, nil
	}, "the manager's cache has SidecarSet %s at generation %d", name, generation)
}

func updateSidecarSet(t *testing.T, name string, mutate func(*deckhandv1alpha1.SidecarSet)) *deckhandv1alpha1.SidecarSet {
	t.Helper()
	s := &deckhandv1alpha1.SidecarSet{}
	for {
		if err := env.Client.Get(ctxT(t), types.NamespacedName{Name: name}, s); err != nil {
			t.Fatal(err)
		}
		mutate(s)
		err := env.Client.Update(ctxT(t), s)
		if err == nil {
			return s
		}
		if !apierrors.IsConflict(err) {
			t.Fatalf("updating SidecarSet %s: %v", name, err)
		}
	}
}

func getSidecarSet(ctx context.Context, name string) (*deckhandv1alpha1.SidecarSet, error) {
	s := &deckhandv1alpha1.SidecarSet{}
	return s, env.Client.Get(ctx, types.NamespacedName{Name: name}, s)
}

// waitStatus waits until the SidecarSet's status, computed for its current
// generation, satisfies ok.
func waitStatus(t *testing.T, name string, timeout time.Duration, what string, ok func(*deckhandv1alpha1.SidecarSet) bool) *deckhandv1alpha1.SidecarSet {
	t.Helper()
	var last *deckhandv1alpha1.SidecarSet
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		s, err := getSidecarSet(ctx, name)
		if err != nil {
			return false, err
		}
		last = s
		return s.Status.ObservedGeneration == s.Generation && ok(s), nil
	}, "SidecarSet %s: %s (last status %+v)", name, what, statusOf(&last))
	return last
}

func statusOf(s **deckhandv1alpha1.SidecarSet) any {
	return lazyStatus{s}
}

type lazyStatus struct{ s **deckhandv1alpha1.SidecarSet }

func (l lazyStatus) String() string {
	if *l.s == nil {
		return "<none>"
	}
	st := (*l.s).Status
	out := ""
	for _, c := range st.Conditions {
		out += " " + c.Type + "=" + string(c.Status) + "/" + c.Reason
	}
	return "matched=" + itoa(st.MatchedPods) + " updated=" + itoa(st.UpdatedPods) + " ready=" + itoa(st.ReadyPods) +
		" updatedReady=" + itoa(st.UpdatedReadyPods) + " notInjected=" + itoa(st.NotInjectedPods) +
		" notUpdatable=" + itoa(st.NotUpdatablePods) + " observedGeneration=" + itoa(int32(st.ObservedGeneration)) + out
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

func condition(s *deckhandv1alpha1.SidecarSet, typ string) *metav1.Condition {
	return meta.FindStatusCondition(s.Status.Conditions, typ)
}

// createPods creates n pods in ns labelled app=app and named by nameFormat
// and their index, and returns them as admitted (with whatever the pod
// webhook injected).
func createPods(t *testing.T, ns, app, nameFormat string, n int) []*corev1.Pod {
	t.Helper()
	pods := make([]*corev1.Pod, 0, n)
	for i := range n {
		p := newPod(ns, fmt.Sprintf(nameFormat, i), map[string]string{"app": app})
		if err := env.Client.Create(ctxT(t), p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	return pods
}

func newPod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
}

func listPods(ctx context.Context, ns string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	err := env.Client.List(ctx, list, client.InNamespace(ns))
	return list.Items, err
}

func containerImage(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}
