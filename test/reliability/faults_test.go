package reliability

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// Leader election as the manager binary configures it by default: a lease of
// 15s, renewed (and tried by a standby) every second.
const (
	leaseDuration = 15 * time.Second
	// failoverBound is how soon the other manager must act as leader after
	// the leader dies: the lease must expire as the standby sees it (up to
	// two retry periods of 1s, with jitter, after it really did), and its
	// controllers start from caches already synced.
	failoverBound = leaseDuration + 5*time.Second
	leaseName     = "deckhand.apps.deckhand.dev"
)

// podSetPods counts the active pods ps's selector matches that no other
// object controls, and the ready ones among them.
func podSetPods(ctx context.Context, ps *deckhandv1alpha1.PodSet) (active, ready int, err error) {
	sel, err := metav1.LabelSelectorAsSelector(ps.Spec.Selector)
	if err != nil {
		return 0, 0, err
	}
	var pods corev1.PodList
	if err := suite.client.List(ctx, &pods, client.InNamespace(ps.Namespace)); err != nil {
		return 0, 0, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if selects(sel, ps.UID, p) {
			active++
			if podutil.IsPodReady(p) {
				ready++
			}
		}
	}
	return active, ready, nil
}

func simplePodSet(ns, name string, replicas int32) *deckhandv1alpha1.PodSet {
	return testutil.PodSet(ns, name, replicas, map[string]string{"app": name}, corev1.Container{Name: "app", Image: "app:1"})
}

func waitPodSet(t *testing.T, ps *deckhandv1alpha1.PodSet, want int, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		active, ready, err := podSetPods(ctx, ps)
		if err != nil {
			return false, err
		}
		return orErr(active == want && ready == want, fmt.Errorf("%d active, %d ready", active, ready))
	}, "PodSet %s has %d ready pods", ps.Name, want)
}

func scalePodSet(t *testing.T, ps *deckhandv1alpha1.PodSet, n int32) {
	t.Helper()
	retry(t, 2*time.Minute, "scaling the PodSet", func(ctx context.Context) error {
		cur := &deckhandv1alpha1.PodSet{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ps), cur); err != nil {
			return err
		}
		cur.Spec.Replicas = ptr.To(n)
		return suite.client.Update(ctx, cur)
	})
}

func leaseHolder(ctx context.Context) (string, error) {
	l := &coordinationv1.Lease{}
	if err := suite.client.Get(ctx, types.NamespacedName{Namespace: localcluster.ManagerNamespace, Name: leaseName}, l); err != nil {
		return "", err
	}
	return ptr.Deref(l.Spec.HolderIdentity, ""), nil
}

// admissionLoad creates, on two goroutines every 200ms each, pods that a
// SidecarSet selects (failurePolicy Ignore: a webhook call that fails
// admits the pod without its sidecar) and RestartSchedules (failurePolicy
// Fail: it refuses the create), and records every outcome.
type admissionLoad struct {
	gate sync.RWMutex // held by each request; Lock: between two requests
	stop chan struct{}
	wg   sync.WaitGroup

	mu          sync.Mutex
	made        int
	notInjected []string
	errs        []string
}

func startAdmissionLoad(t *testing.T, ns, prefix string, podLabels map[string]string) *admissionLoad {
	l := &admissionLoad{stop: make(chan struct{})}
	pod := func(i int) (client.Object, func() string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-pod-%d", prefix, i), Namespace: ns, Labels: podLabels},
			// Never scheduled: the fake nodes have nothing to run.
			Spec: corev1.PodSpec{NodeSelector: map[string]string{"deckhand.dev/no-such-node": "true"},
				Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		}
		return p, func() string {
			if len(p.Spec.Containers) != 2 {
				return fmt.Sprintf("pod %s admitted with %d containers", p.Name, len(p.Spec.Containers))
			}
			return ""
		}
	}
	schedule := func(i int) (client.Object, func() string) {
		return &deckhandv1alpha1.RestartSchedule{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-adm-%d", prefix, i), Namespace: ns},
			Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "0 3 * * *", Suspend: true,
				Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: "x"}}},
		}, func() string { return "" }
	}
	for _, newObj := range []func(int) (client.Object, func() string){pod, schedule} {
		l.wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				obj, check := newObj(i)
				l.gate.RLock()
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := suite.client.Create(ctx, obj)
				cancel()
				l.gate.RUnlock()
				l.mu.Lock()
				l.made++
				if err != nil {
					l.errs = append(l.errs, err.Error())
				} else if msg := check(); msg != "" {
					l.notInjected = append(l.notInjected, msg)
				}
				l.mu.Unlock()
			}
		})
	}
	t.Cleanup(l.Stop)
	return l
}

// Made is how many admission requests were made so far.
func (l *admissionLoad) Made() int { l.mu.Lock(); defer l.mu.Unlock(); return l.made }

// Between runs fn while no request of the load is in flight.
func (l *admissionLoad) Between(fn func()) {
	l.gate.Lock()
	defer l.gate.Unlock()
	fn()
}

// Stop ends the load.
func (l *admissionLoad) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// waitMade waits until the load has made n requests in all.
func (l *admissionLoad) waitMade(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, 2*time.Minute, func(context.Context) (bool, error) {
		return l.Made() >= n, nil
	}, "%d admission requests are made", n)
}

// TestLeaderFailover runs two managers with leader election behind
// serviceProxy, which stands in for their Service: the webhook
// configurations point at it and it spreads connections over both
// replicas, skipping one that refuses. Both serve the suite's certificate
// (one cert dir, valid for 127.0.0.1), as replicas mounting one Secret do.
// Pods a SidecarSet selects and RestartSchedules are created all through
// (before, during and after the leader is SIGKILLed): every pod must be
// injected (the standby's webhook and SidecarSet cache serve it) and no
// create may fail. The standby must act as leader (the PodSet scale-up
// requested right after the kill starts) within the lease duration + 5s.
//
// The kill falls between two of the test's requests: a request in flight to
// a replica that dies fails in any cluster (the API server does not retry a
// webhook call the replica had received), and that is not what this test
// measures.
func TestLeaderFailover(t *testing.T) {
	rounds := 1
	if stress() {
		rounds = 5
	}
	ns := namespace(t)
	suite.deckhand.Stop()
	t.Cleanup(func() {
		if err := installWebhooks(context.Background(), suite.port); err != nil {
			t.Errorf("restoring the webhooks: %v", err)
		}
		ensureDeckhand(t)
	})
	proxy := startServiceProxy(t)
	if err := installWebhooks(testutil.Context(t, time.Minute), proxy.Port()); err != nil {
		t.Fatal(err)
	}
	freePort := func() int {
		port, err := localcluster.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		return port
	}

	leaderPort := freePort()
	proxy.SetBackends(leaderPort)
	leader := startManager(t, "deckhand-a", leaderPort, "--leader-elect=true")
	var leaderID string
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		h, err := leaseHolder(ctx)
		leaderID = h
		return h != "", err
	}, "the first manager holds the lease")

	injected := map[string]string{"app": "failover-injected"}
	createSidecarSet(t, "failover-"+ns, ns, injected)

	var takeovers, acts []time.Duration
	admissions, badAdmissions := 0, 0
	for round := range rounds {
		standbyPort := freePort()
		standby := startManager(t, fmt.Sprintf("deckhand-%c", 'b'+round), standbyPort, "--leader-elect=true")
		proxy.SetBackends(leaderPort, standbyPort)
		ps := simplePodSet(ns, fmt.Sprintf("failover-%d", round), 2)
		retry(t, time.Minute, "creating a PodSet", func(ctx context.Context) error { return suite.client.Create(ctx, ps) })
		waitPodSet(t, ps, 2, 3*time.Minute)

		load := startAdmissionLoad(t, ns, fmt.Sprintf("r%d", round), injected)
		load.waitMade(t, 10)
		var killed time.Time
		load.Between(func() {
			killed = time.Now()
			leader.Kill()
			// The dead replica's connections end (as they do through a
			// Service) before the next request.
			if err := proxy.waitClosed(testutil.Context(t, time.Minute), leaderPort); err != nil {
				t.Error(err)
			}
		})
		atKill := load.Made()
		scalePodSet(t, ps, 5) // work only a leader does
		var took, acted time.Duration
		var newID string
		testutil.Eventually(t, 2*failoverBound, func(ctx context.Context) (bool, error) {
			if took == 0 {
				h, err := leaseHolder(ctx)
				if err != nil {
					return false, err
				}
				if h != "" && h != leaderID {
					took, newID = time.Since(killed), h
				}
			}
			if acted == 0 {
				active, _, err := podSetPods(ctx, ps)
				if err != nil {
					return false, err
				}
				if active > 2 {
					acted = time.Since(killed)
				}
			}
			return took > 0 && acted > 0, nil
		}, "the standby manager takes the lease and scales the PodSet up")
		atActed := load.Made()
		waitPodSet(t, ps, 5, 3*time.Minute)
		load.waitMade(t, atActed+10)
		load.Stop()

		if acted > failoverBound {
			t.Errorf("round %d: the standby acted as leader %s after the kill; want within %s (lease duration %s + 5s)", round, acted, failoverBound, leaseDuration)
		}
		load.mu.Lock()
		made, uninjected, failed := load.made, len(load.notInjected), len(load.errs)
		if uninjected > 0 {
			t.Errorf("round %d: %d of %d admissions admitted a pod without its sidecar, first: %s", round, uninjected, made, load.notInjected[0])
		}
		if failed > 0 {
			t.Errorf("round %d: %d of %d admission requests failed, first: %s", round, failed, made, load.errs[0])
		}
		load.mu.Unlock()
		if during := atActed - atKill; during < 5 {
			t.Errorf("round %d: only %d admission requests were made between the kill and the standby's first action", round, during)
		}
		admissions += made
		badAdmissions += uninjected + failed
		takeovers = append(takeovers, took.Round(100*time.Millisecond))
		acts = append(acts, acted.Round(100*time.Millisecond))
		skipped, dropped := proxy.Skipped()
		t.Logf("round %d: %s took the lease %s after the kill (was %s) and scaled up %s after; %d admissions (%d before the kill, %d until the standby acted): %d failed, %d pods without their sidecar; proxy: %d connections to the killed replica, %d to the standby, %d skipped a dead replica, %d dropped",
			round, newID, took, leaderID, acted, made, atKill, atActed-atKill, failed, uninjected, proxy.Served(leaderPort), proxy.Served(standbyPort), skipped, dropped)
		leader, leaderPort, leaderID = standby, standbyPort, newID
	}
	figure(t, "%d leader failover(s) behind a round-robin proxy: lease taken over after %v, the standby acted (scale-up started) after %v (bound %s); %d admissions through them (pods a SidecarSet injects, RestartSchedules), %d failed or without their sidecar",
		rounds, takeovers, acts, failoverBound, admissions, badAdmissions)
}

// TestAPIServerRestart stops kube-apiserver while a manager is creating a
// PodSet's pods and starts it again 3s later. The outage begins as soon as
// the first pod exists, and the manager runs with --kube-api-qps=5 (a burst
// of 7 requests, then 5 a second), so the API server goes down mid-way
// through the scale-up: the pods stored in etcd while it is down are
// counted and must be fewer than spec.replicas. Afterwards the manager
// process is the same (pid), all replicas are Ready, and there were never
// more pods than replicas.
func TestAPIServerRestart(t *testing.T) {
	ensureDeckhand(t)
	ns := testutil.Namespace(t, suite.client)
	refusals := testenv.FailOnRefusals(t, suite.cluster.ManagerRefusals)
	n := 20
	if stress() {
		n = 100
	}
	suite.deckhand.Stop()
	t.Cleanup(func() { ensureDeckhand(t) })
	mgr := startManager(t, "deckhand-slow-client", suite.port, "--leader-elect=false", "--kube-api-qps=5")
	ps := simplePodSet(ns, "apiserver-restart", int32(n))
	sel := labels.SelectorFromSet(ps.Spec.Selector.MatchLabels)

	// Every pod the PodSet counts, from a watch (an informer: it lists
	// again after the outage) over the whole test.
	w := watchPods(t, ns)
	retry(t, time.Minute, "creating a PodSet", func(ctx context.Context) error { return suite.client.Create(ctx, ps) })
	count := func(pods map[string]*corev1.Pod) int {
		c := 0
		for _, p := range pods {
			if selects(sel, ps.UID, p) {
				c++
			}
		}
		return c
	}
	most := 0
	w.setCheck(func(pods map[string]*corev1.Pod) error {
		c := count(pods)
		most = max(most, c)
		if c > n {
			return fmt.Errorf("%d pods of the PodSet, more than its %d replicas", c, n)
		}
		return nil
	})
	watched := func() int { w.mu.Lock(); defer w.mu.Unlock(); return count(w.pods) }
	testutil.Eventually(t, time.Minute, func(context.Context) (bool, error) {
		return watched() > 0, nil
	}, "the manager creates the first pod")

	pid := mgr.Pid()
	atStop := -1
	err := suite.cluster.APIServerOutage(testutil.Context(t, 3*time.Minute), 3*time.Second, func(ctx context.Context) error {
		var err error
		atStop, err = suite.cluster.EtcdCount(ctx, "/registry/pods/"+ns+"/")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The restarted API server refused the manager's watches until it was
	// ready; from here on every refusal counts.
	refusals.Excuse()
	back := time.Now()
	if atStop < 1 || atStop >= n {
		t.Errorf("%d pods existed while the API server was down: want the scale-up to %d in flight (at least 1, fewer than %d)", atStop, n, n)
	}
	waitPodSet(t, ps, n, 5*time.Minute)
	recovered := time.Since(back)
	// The watch has followed through the outage: it sees them all too.
	testutil.Eventually(t, time.Minute, func(context.Context) (bool, error) {
		c := watched()
		return orErr(c == n, fmt.Errorf("the watch sees %d pods", c))
	}, "the watch sees the %d pods", n)
	scalePodSet(t, ps, 3)
	waitPodSet(t, ps, 3, 3*time.Minute)
	if mgr.Exited() || mgr.Pid() != pid {
		t.Fatalf("the manager restarted or exited during the API server restart:\n%s", mgr.Logs(40))
	}
	w.assertHeld(t)
	w.mu.Lock()
	defer w.mu.Unlock()
	figure(t, "kube-apiserver stopped (3s down) while a manager at --kube-api-qps=5 scaled a PodSet to %d: %d pods existed while it was down; the manager kept running (same pid), converged %s after the API server was back, never more than %d pods",
		n, atStop, recovered.Round(100*time.Millisecond), most)
}

// TestWebhookUnavailable: with Deckhand down, pods are still created (the
// pod webhook's failurePolicy is Ignore), without sidecars; once Deckhand is
// back the SidecarSet's status counts them in notInjectedPods.
func TestWebhookUnavailable(t *testing.T) {
	ensureDeckhand(t)
	ns := namespace(t)
	podLabels := map[string]string{"app": "webhook-down"}
	s := createSidecarSet(t, "down-"+ns, ns, podLabels)
	newPod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: podLabels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	}
	for i := range 2 {
		p := newPod(fmt.Sprintf("up-%d", i))
		if err := suite.client.Create(testutil.Context(t, time.Minute), p); err != nil || len(p.Spec.Containers) != 2 {
			t.Fatalf("pod created while Deckhand is up: %v, %d containers", err, len(p.Spec.Containers))
		}
	}

	suite.deckhand.Kill()
	missed := 3
	var slowest time.Duration
	for i := range missed {
		p := newPod(fmt.Sprintf("down-%d", i))
		began := time.Now()
		if err := suite.client.Create(testutil.Context(t, time.Minute), p); err != nil {
			t.Fatalf("a pod was refused while Deckhand is down (the pod webhook must fail open): %v", err)
		}
		slowest = max(slowest, time.Since(began))
		if len(p.Spec.Containers) != 1 {
			t.Fatalf("pod %s got %d containers with Deckhand down", p.Name, len(p.Spec.Containers))
		}
	}
	// A SidecarSet write, by contrast, is refused (failurePolicy Fail).
	cur := &deckhandv1alpha1.SidecarSet{}
	if err := suite.client.Get(testutil.Context(t, time.Minute), client.ObjectKeyFromObject(s), cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Containers[0].Image = "sidecar:2"
	if err := suite.client.Update(testutil.Context(t, time.Minute), cur); err == nil || !strings.Contains(err.Error(), "webhook") {
		t.Errorf("a SidecarSet update with Deckhand down: want it refused by the unreachable webhook, got %v", err)
	}

	if err := suite.deckhand.Restart(testutil.Context(t, 3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 3*time.Minute, func(ctx context.Context) (bool, error) {
		cur := &deckhandv1alpha1.SidecarSet{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return false, err
		}
		st := cur.Status
		cond := false
		for _, c := range st.Conditions {
			if c.Type == deckhandv1alpha1.SidecarSetPodsInjectedCondition && c.Status == metav1.ConditionFalse {
				cond = true
			}
		}
		return orErr(st.NotInjectedPods == int32(missed) && cond, fmt.Errorf("status %+v", st))
	}, "the SidecarSet reports %d pods that missed injection", missed)
	figure(t, "%d pods created while Deckhand was down: all admitted (slowest create %s) without sidecars, reported in status.notInjectedPods",
		missed, slowest.Round(time.Millisecond))
}
