package sidecarset_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// scenario is what most tests of the package start from: a namespace of the
// test's own and, limited to it, a SidecarSet named <app>-<namespace> that
// injects the container proxy (image proxy:1) into the pods labelled
// app=<app>.
type scenario struct {
	t    *testing.T
	ns   string
	app  string
	name string // of the SidecarSet
	set  *deckhandv1alpha1.SidecarSet
}

// newScenario creates the scenario's namespace and SidecarSet, the latter
// changed by edits first, and waits until the pod webhook can see it.
func newScenario(t *testing.T, app string, edits ...func(*deckhandv1alpha1.SidecarSet)) *scenario {
	t.Helper()
	ns := env.Namespace(t)
	sc := &scenario{t: t, ns: ns, app: app, name: app + "-" + ns}
	sc.set = newSidecarSet(sc.name, ns, app, "proxy:1")
	for _, edit := range edits {
		edit(sc.set)
	}
	createSidecarSet(t, sc.set)
	return sc
}

// pod returns a pod of the scenario's app, not yet created.
func (sc *scenario) pod(name string) *corev1.Pod {
	return newPod(sc.ns, name, map[string]string{"app": sc.app})
}

// create creates p and returns it as admitted (with whatever the pod webhook
// injected).
func (sc *scenario) create(p *corev1.Pod) *corev1.Pod {
	sc.t.Helper()
	if err := env.Client.Create(ctxT(sc.t), p); err != nil {
		sc.t.Fatal(err)
	}
	return p
}

// createPods creates n pods of the scenario's app named by nameFormat and
// their index.
func (sc *scenario) createPods(nameFormat string, n int) []*corev1.Pod {
	sc.t.Helper()
	return createPods(sc.t, sc.ns, sc.app, nameFormat, n)
}

// pods lists the pods of the scenario's namespace.
func (sc *scenario) pods() []corev1.Pod {
	sc.t.Helper()
	pods, err := listPods(ctxT(sc.t), sc.ns)
	if err != nil {
		sc.t.Fatal(err)
	}
	return pods
}

// getPod reads one of the scenario's pods.
func (sc *scenario) getPod(ctx context.Context, name string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	return p, env.Client.Get(ctx, types.NamespacedName{Namespace: sc.ns, Name: name}, p)
}

// podImage reads the image of a container of one of the scenario's pods.
func (sc *scenario) podImage(pod, container string) string {
	sc.t.Helper()
	got, err := sc.getPod(ctxT(sc.t), pod)
	if err != nil {
		sc.t.Fatal(err)
	}
	return containerImage(got, container)
}

// update changes the scenario's SidecarSet with mutate and returns it as
// stored.
func (sc *scenario) update(mutate func(*deckhandv1alpha1.SidecarSet)) *deckhandv1alpha1.SidecarSet {
	sc.t.Helper()
	return updateSidecarSet(sc.t, sc.name, mutate)
}

// waitStatus waits until the status of the scenario's SidecarSet, computed
// for its current generation, satisfies ok.
func (sc *scenario) waitStatus(timeout time.Duration, what string, ok func(*deckhandv1alpha1.SidecarSet) bool) *deckhandv1alpha1.SidecarSet {
	sc.t.Helper()
	return waitStatus(sc.t, sc.name, timeout, what, ok)
}

// waitUpdatedReady waits until the scenario's SidecarSet matches n pods,
// every one updated and ready.
func (sc *scenario) waitUpdatedReady(timeout time.Duration, n int32) *deckhandv1alpha1.SidecarSet {
	sc.t.Helper()
	return sc.waitStatus(timeout, fmt.Sprintf("%d pods matched, updated and ready", n), func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == n && s.Status.UpdatedReadyPods == n
	})
}

// ctxT bounds a test's requests by two minutes.
func ctxT(t *testing.T) context.Context { return testutil.Context(t, 2*time.Minute) }

// podCount is n pods, as updateStrategy.maxUnavailable and partition (and
// a PodDisruptionBudget's maxUnavailable) take a number.
func podCount(n int32) *intstr.IntOrString { return ptr.To(intstr.FromInt32(n)) }

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
	waitCachedStatus(t, name, fmt.Sprintf("generation %d or later", generation), func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Generation >= generation
	})
}

// waitCachedStatus waits until the manager's cache (which the pod webhook
// reads) shows the SidecarSet as ok (described by what) accepts.
func waitCachedStatus(t *testing.T, name, what string, ok func(*deckhandv1alpha1.SidecarSet) bool) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		got := &deckhandv1alpha1.SidecarSet{}
		if err := env.Manager().GetCache().Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			return false, err
		}
		return ok(got), nil
	}, "the manager's cache shows SidecarSet %s with %s", name, what)
}

func updateSidecarSet(t *testing.T, name string, mutate func(*deckhandv1alpha1.SidecarSet)) *deckhandv1alpha1.SidecarSet {
	t.Helper()
	s := &deckhandv1alpha1.SidecarSet{}
	for {
		testutil.Get(ctxT(t), t, env.Client, types.NamespacedName{Name: name}, s)
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

// statusOf describes the status of *s when a failure message is printed.
func statusOf(s **deckhandv1alpha1.SidecarSet) fmt.Stringer {
	return lazy(func() any {
		if *s == nil {
			return "<none>"
		}
		st := (*s).Status
		out := ""
		for _, c := range st.Conditions {
			out += " " + c.Type + "=" + string(c.Status) + "/" + c.Reason
		}
		return fmt.Sprintf("matched=%d updated=%d ready=%d updatedReady=%d notInjected=%d notUpdatable=%d observedGeneration=%d",
			st.MatchedPods, st.UpdatedPods, st.ReadyPods, st.UpdatedReadyPods, st.NotInjectedPods, st.NotUpdatablePods, st.ObservedGeneration) + out
	})
}

// lazyFn prints what f returns when it is printed, so that a failure
// message shows the last state seen rather than the first.
type lazyFn func() any

func (f lazyFn) String() string { return fmt.Sprint(f()) }

func lazy(f func() any) fmt.Stringer { return lazyFn(f) }

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

func containerImage(p *corev1.Pod, name string) string { return imageOf(p.Spec.Containers, name) }

func initImage(p *corev1.Pod, name string) string { return imageOf(p.Spec.InitContainers, name) }

// imageOf is the image of the container called name in list, "" if none.
func imageOf(list []corev1.Container, name string) string {
	if c := podutil.FindContainer(list, name); c != nil {
		return c.Image
	}
	return ""
}

func names(cs []corev1.Container) []string {
	out := make([]string, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// uidsByName maps the name of each of pods to its UID, so that a test can
// tell later whether a pod was recreated.
func uidsByName(pods []*corev1.Pod) map[string]types.UID {
	out := make(map[string]types.UID, len(pods))
	for _, p := range pods {
		out[p.Name] = p.UID
	}
	return out
}

// wantNotRecreated checks that p is the pod uids (from uidsByName) recorded
// under its name.
func wantNotRecreated(t *testing.T, p *corev1.Pod, uids map[string]types.UID) {
	t.Helper()
	if p.UID != uids[p.Name] {
		t.Errorf("pod %s was recreated: UID %s, want %s", p.Name, p.UID, uids[p.Name])
	}
}

// uidSet is the set of the UIDs of pods.
func uidSet(pods []corev1.Pod) map[types.UID]bool {
	out := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		out[p.UID] = true
	}
	return out
}
