package podset_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	podsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/podset"
)

// env is a full local cluster: kube-apiserver, etcd, kube-controller-manager
// (garbage collector), kube-scheduler and kwok, whose fake node makes
// scheduled pods Running and Ready. The PodSet controller and webhook run
// in an in-process manager that tests can restart.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Full: true,
		// The reconciler reads and claims the cache's own pods, copying
		// only what it writes.
		DetectCacheMutations: true,
		Setup: func(mgr ctrl.Manager) error {
			r := &podset.Reconciler{}
			if s := nextManager.Load(); s != nil {
				if err := s.apply(mgr, r); err != nil {
					return err
				}
			}
			if err := r.SetupWithManager(mgr); err != nil {
				return err
			}
			return podsetwebhook.SetupWebhookWithManager(mgr)
		},
	}))
}

const pauseImage = "registry.k8s.io/pause:3.10"

// newPodSet returns a PodSet selecting app=<name>.
func newPodSet(ns, name string, replicas int32, mut ...func(*deckhandv1alpha1.PodSet)) *deckhandv1alpha1.PodSet {
	ps := &deckhandv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: deckhandv1alpha1.PodSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, "tier": "test"}},
				Spec: corev1.PodSpec{
					Containers:                    []corev1.Container{{Name: "main", Image: pauseImage}},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
				},
			},
		},
	}
	for _, m := range mut {
		m(ps)
	}
	return ps
}

// createPodSet creates, in a namespace of the test's own, the PodSet
// newPodSet describes.
func createPodSet(t *testing.T, name string, replicas int32, mut ...func(*deckhandv1alpha1.PodSet)) *deckhandv1alpha1.PodSet {
	t.Helper()
	ps := newPodSet(env.Namespace(t), name, replicas, mut...)
	mustCreate(t, ps)
	return ps
}

func onDelete(ps *deckhandv1alpha1.PodSet) {
	ps.Spec.UpdateStrategy.Type = deckhandv1alpha1.OnDeletePodSetStrategyType
}

// ctxT bounds a test's requests by five minutes: rollouts on a loaded
// machine take a while.
func ctxT(t *testing.T) context.Context { return testutil.Context(t, 5*time.Minute) }

func mustCreate(t *testing.T, obj client.Object) {
	t.Helper()
	testutil.Create(ctxT(t), t, env.Client, obj)
}

// ownedPods lists the pods whose controller is ps (active and terminating).
func ownedPods(ctx context.Context, ps *deckhandv1alpha1.PodSet) ([]corev1.Pod, error) {
	var list corev1.PodList
	if err := env.Client.List(ctx, &list, client.InNamespace(ps.Namespace)); err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == ps.UID {
			out = append(out, p)
		}
	}
	return out, nil
}

func activeNames(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// waitConverged waits until ps has exactly n owned pods, all Ready, and a
// status that says so for the current generation; it returns the PodSet.
func waitConverged(t *testing.T, ps *deckhandv1alpha1.PodSet, n int32, timeout time.Duration) *deckhandv1alpha1.PodSet {
	t.Helper()
	return waitPodSet(t, ps, timeout, fmt.Sprintf("PodSet %s converges on %d ready pods", ps.Name, n), func(cur *deckhandv1alpha1.PodSet, pods []corev1.Pod) (bool, string) {
		ready := 0
		for i := range pods {
			if pods[i].DeletionTimestamp == nil && podutil.IsPodReady(&pods[i]) {
				ready++
			}
		}
		st := cur.Status
		state := fmt.Sprintf("pods=%d ready=%d generation=%d status={replicas:%d ready:%d available:%d updated:%d terminating:%d observedGeneration:%d}",
			len(pods), ready, cur.Generation, st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.UpdatedReplicas, st.TerminatingReplicas, st.ObservedGeneration)
		return len(pods) == int(n) && ready == int(n) &&
			st.ObservedGeneration == cur.Generation &&
			st.Replicas == n && st.ReadyReplicas == n && st.AvailableReplicas == n &&
			st.UpdatedReplicas == n && st.TerminatingReplicas == 0, state
	})
}

// waitPodSet waits until cond holds for ps as it now stands and the pods it
// owns (cond's second answer says how things stand); it returns the PodSet.
func waitPodSet(t *testing.T, ps *deckhandv1alpha1.PodSet, timeout time.Duration, what string,
	cond func(cur *deckhandv1alpha1.PodSet, pods []corev1.Pod) (bool, string)) *deckhandv1alpha1.PodSet {
	t.Helper()
	cur := &deckhandv1alpha1.PodSet{}
	eventually(t, timeout, what, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ps), cur); err != nil {
			return false, "", err
		}
		pods, err := ownedPods(ctx, cur)
		if err != nil {
			return false, "", err
		}
		ok, state := cond(cur, pods)
		return ok, state, nil
	})
	return cur
}

// waitFor waits until cond holds for obj as the API server now has it
// (cond's second answer says how things stand), and returns it as last read.
func waitFor[T client.Object](t *testing.T, obj T, timeout time.Duration, what string, cond func(cur T) (bool, string)) T {
	t.Helper()
	cur := obj.DeepCopyObject().(T)
	eventually(t, timeout, what, func(ctx context.Context) (bool, string, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
			return false, "", err
		}
		ok, state := cond(cur)
		return ok, state, nil
	})
	return cur
}

// waitPodSetConditions waits until the status of ps, for its current
// generation, satisfies ok, and returns the PodSet.
func waitPodSetConditions(t *testing.T, ps *deckhandv1alpha1.PodSet, what string, ok func(*deckhandv1alpha1.PodSetStatus) bool) *deckhandv1alpha1.PodSet {
	t.Helper()
	return waitFor(t, ps, time.Minute, what, func(cur *deckhandv1alpha1.PodSet) (bool, string) {
		var conds []string
		for _, c := range cur.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
		state := fmt.Sprintf("replicas=%d updated=%d available=%d observedGeneration=%d/%d conditions=%v",
			cur.Status.Replicas, cur.Status.UpdatedReplicas, cur.Status.AvailableReplicas, cur.Status.ObservedGeneration, cur.Generation, conds)
		return cur.Status.ObservedGeneration == cur.Generation && ok(&cur.Status), state
	})
}

// waitEvent waits for an Event of type typ with reason about ps whose note
// contains text.
func waitEvent(t *testing.T, ps *deckhandv1alpha1.PodSet, typ, reason, text string) {
	t.Helper()
	eventually(t, time.Minute, fmt.Sprintf("a %s %s Event about PodSet %s mentioning %q", typ, reason, ps.Name, text), func(ctx context.Context) (bool, string, error) {
		list, err := env.Clientset.EventsV1().Events(ps.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Regarding.Kind != "PodSet" || e.Regarding.Name != ps.Name {
				continue
			}
			seen = append(seen, e.Type+" "+e.Reason+": "+e.Note)
			if e.Type == typ && e.Reason == reason && strings.Contains(e.Note, text) {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("events %q", seen), nil
	})
}

func setReplicas(t *testing.T, ps *deckhandv1alpha1.PodSet, n int32) {
	t.Helper()
	mergePatch(t, ps, fmt.Sprintf(`{"spec":{"replicas":%d}}`, n))
}

// mergePatch applies the JSON merge patch to obj, which then holds the
// object as patched, and fails t if the API server refuses it.
func mergePatch(t *testing.T, obj client.Object, patch string) {
	t.Helper()
	if err := tryMergePatch(t, obj, patch); err != nil {
		t.Fatalf("patching %T %s with %s: %v", obj, obj.GetName(), patch, err)
	}
}

// tryMergePatch applies the JSON merge patch to obj and returns the API
// server's answer.
func tryMergePatch(t *testing.T, obj client.Object, patch string) error {
	return env.Client.Patch(ctxT(t), obj, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// eventually polls cond every 100ms until it reports done, failing the test
// after timeout with what and the last state cond described.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, string, error)) {
	t.Helper()
	var state string
	var lastErr error
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		ok, s, err := cond(ctx)
		if s != "" {
			state = s
		}
		lastErr = err
		if !ok && err == nil {
			return false, fmt.Errorf("%s", state)
		}
		return ok, err
	}, "%s", what)
	_ = lastErr
}

// managerSettings are what a test changes in the PodSet controller of the
// managers started while it runs; the zero value is the normal controller.
type managerSettings struct {
	// slowWatch, when non-zero, makes the controller watch pods through
	// slowPodCache with that delay.
	slowWatch time.Duration
	// clock, when set, is the controller's clock.
	clock *clocktesting.FakeClock
	// lostCreateEvery, when non-zero, makes every n-th pod create of the
	// controller's client answer a timeout (losingCreates).
	lostCreateEvery int64
}

var nextManager atomic.Pointer[managerSettings]

func (s *managerSettings) apply(mgr ctrl.Manager, r *podset.Reconciler) error {
	if s.slowWatch > 0 {
		c, err := slowPodCache(mgr, s.slowWatch)
		if err != nil {
			return err
		}
		r.PodCache = c
	}
	if s.clock != nil {
		r.Clock = s.clock
	}
	if s.lostCreateEvery > 0 {
		r.PodWriter = losingCreates(mgr.GetClient(), s.lostCreateEvery)
	}
	return nil
}

// useManagerSettings makes the managers started from now until t ends run
// with s; once t ends, a normal manager takes over again.
func useManagerSettings(t *testing.T, s managerSettings) {
	nextManager.Store(&s)
	t.Cleanup(func() {
		nextManager.Store(nil)
		env.StopManager()
		if _, err := env.StartManager(); err != nil {
			t.Errorf("restarting the normal manager: %v", err)
		}
	})
}

// restartManager stops the manager and starts a new one, with an empty
// cache and no expectations.
func restartManager(t *testing.T) {
	t.Helper()
	env.StopManager()
	if _, err := env.StartManager(); err != nil {
		t.Fatalf("restarting the manager: %v", err)
	}
}

// slowPodCache returns an informer cache (added to mgr) whose pod watch
// stream is read with a pause before every read, so the controller sees its
// own creates and deletes late, both in reads and in events, as with a
// loaded API server or a slow network.
func slowPodCache(mgr ctrl.Manager, delay time.Duration) (cache.Cache, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return slowWatchTransport{rt: rt, delay: delay} })
	c, err := cache.New(cfg, cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, err
	}
	return c, mgr.Add(c)
}

type slowWatchTransport struct {
	rt    http.RoundTripper
	delay time.Duration
}

func (t slowWatchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil || req.URL.Query().Get("watch") != "true" || !strings.HasSuffix(req.URL.Path, "/pods") {
		return resp, err
	}
	resp.Body = &slowBody{ReadCloser: resp.Body, delay: t.delay}
	return resp, nil
}

type slowBody struct {
	io.ReadCloser
	delay time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	time.Sleep(b.delay)
	return b.ReadCloser.Read(p)
}
