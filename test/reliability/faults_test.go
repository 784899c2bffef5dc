package reliability

import (
	"context"
	"errors"
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
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// Leader election as the manager binary configures it by default: a lease of
// 15s, renewed by the leader and tried by a standby every retryPeriod.
const (
	leaseDuration = 15 * time.Second
	retryPeriod   = time.Second
	// leaseTakenBound is how soon after the leader dies the standby holds
	// the Lease, as client-go's elector works: a standby tries every
	// retryPeriod plus up to leaderelection.JitterFactor of it, so it first
	// sees the dead leader's last renewal up to (1+JitterFactor) retry
	// periods after it was written, takes the Lease on its first try a full
	// leaseDuration after that sighting, up to (1+JitterFactor) retry
	// periods later, and each of those steps waits on one API call
	// (apiCallAllowance).
	leaseTakenBound = leaseDuration + 2*time.Duration((1+leaderelection.JitterFactor)*float64(retryPeriod)) + 2*apiCallAllowance
	// apiCallAllowance is what one API call may take on the loaded test
	// cluster.
	apiCallAllowance = 500 * time.Millisecond
	// actTimeout is how long after taking the Lease the new leader may take
	// to act before the test gives up: a liveness bound, not a figure. Its
	// part (its controllers are warm, so the PodSet's first sync confirms
	// its pod cache with one consistent list and creates a pod) is two API
	// calls, whose time is the loaded API server's; the test reports it
	// (docs/reliability.md, "Where a failover's time goes").
	actTimeout = 30 * time.Second
	// failoverBound is how long after the leader dies the test waits for
	// the standby to act.
	failoverBound = leaseTakenBound + actTimeout
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
	// Filtered by the API server: the namespace may hold a thousand load
	// pods, and listing them all would slow the failover test's polls.
	if err := suite.client.List(ctx, &pods, client.InNamespace(ps.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
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
	l, err := managerLease(ctx)
	if err != nil {
		return "", err
	}
	return ptr.Deref(l.Spec.HolderIdentity, ""), nil
}

// managerLease is the managers' leader-election Lease.
func managerLease(ctx context.Context) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	err := suite.client.Get(ctx, types.NamespacedName{Namespace: localcluster.ManagerNamespace, Name: leaseName}, l)
	return l, err
}

// scheduleLoad creates a RestartSchedule every 200ms and counts the
// creates refused: its webhooks' failurePolicy Fail refuses a create whose
// webhook call failed.
type scheduleLoad struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu   sync.Mutex
	made int
	errs []string
}

func startScheduleLoad(t *testing.T, ns, prefix string) *scheduleLoad {
	l := &scheduleLoad{stop: make(chan struct{})}
	l.wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			obj := &deckhandv1alpha1.RestartSchedule{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-adm-%d", prefix, i), Namespace: ns},
				Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "0 3 * * *", Suspend: true,
					Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: "x"}}},
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := suite.client.Create(ctx, obj)
			cancel()
			l.mu.Lock()
			l.made++
			if err != nil {
				l.errs = append(l.errs, err.Error())
			}
			l.mu.Unlock()
		}
	})
	t.Cleanup(l.Stop)
	return l
}

// Stop ends the load.
func (l *scheduleLoad) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// Result is how many creates were made and refused.
func (l *scheduleLoad) Result() (made, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.made, len(l.errs)
}

// notInjectedBound is how soon after the standby's first action as leader
// the SidecarSet's status must count the pods admitted without its
// sidecar: the first reconciles of a new leader and a status write.
const notInjectedBound = 5 * time.Second

// TestLeaderFailover runs two managers with leader election behind
// kubeProxy, which stands in for their Service, and SIGKILLs the leader
// while pods a SidecarSet selects (podLoad, 10 a second) and
// RestartSchedules (every 200ms) are created. The standby must take the
// Lease within leaseTakenBound of the kill and then act as leader (the
// PodSet scale-up requested right after the kill starts); how soon after
// taking the Lease it acts is reported, not bounded.
//
// A SIGKILL leaves no time to drain: until the dead replica's endpoint is
// dropped (endpointDelay), new connections sent to it are refused, and the
// API server does not retry an admission call (a POST). Those pods are
// admitted without their sidecar (failurePolicy Ignore) and those
// RestartSchedule creates are refused (failurePolicy Fail): both are
// counted, not forbidden. Every pod admitted without its sidecar must be
// counted in the SidecarSet's status.notInjectedPods within
// notInjectedBound of the standby's first action.
func TestLeaderFailover(t *testing.T) {
	rounds := scaled(1, 5)
	ns := namespace(t)
	proxy := behindProxy(t)
	leader := startReplica(t, proxy, "deckhand-a")
	var leaderID string
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		h, err := leaseHolder(ctx)
		leaderID = h
		return h != "", err
	}, "the first manager holds the lease")
	// leaseTakenBound is computed from leaseDuration: it must be the one the
	// binary runs with, as its holder writes it into the Lease.
	l, err := managerLease(testutil.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0)) * time.Second; got != leaseDuration {
		t.Fatalf("the managers run with a %s Lease, the test's bounds assume %s", got, leaseDuration)
	}

	injected := map[string]string{"app": "failover-injected"}
	s := createSidecarSet(t, "failover-"+ns, ns, injected)

	var takeovers, acts, leaseToAct, reports []time.Duration
	pods, missed, schedules, refused := 0, 0, 0, 0
	var perRound []int
	for round := range rounds {
		standby := startReplica(t, proxy, fmt.Sprintf("deckhand-%c", 'b'+round))
		proxy.waitEndpoints(t, leader.port, standby.port)
		ps := simplePodSet(ns, fmt.Sprintf("failover-%d", round), 2)
		retry(t, time.Minute, "creating a PodSet", func(ctx context.Context) error { return suite.client.Create(ctx, ps) })
		waitPodSet(t, ps, 2, 3*time.Minute)

		load := startPodLoad(t, ns, fmt.Sprintf("r%d", round), injected)
		schedLoad := startScheduleLoad(t, ns, fmt.Sprintf("r%d", round))
		load.waitMade(t, 20)
		killed := time.Now()
		leader.Kill()
		atKill := load.Made()
		scalePodSet(t, ps, 5) // work only a leader does
		var took, acted time.Duration
		var newID string
		testutil.Eventually(t, failoverBound, func(ctx context.Context) (bool, error) {
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

		// The misses so far are all the round's: the dead endpoint was
		// dropped long before the lease expired.
		_, roundMissed, _, _ := load.Result()
		want := missed + roundMissed
		var reported time.Duration
		testutil.Eventually(t, notInjectedBound, func(ctx context.Context) (bool, error) {
			cur := &deckhandv1alpha1.SidecarSet{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
				return false, err
			}
			reported = time.Since(killed)
			got := cur.Status.NotInjectedPods
			return orErr(got == int32(want), fmt.Errorf("status.notInjectedPods %d", got))
		}, "the SidecarSet counts the %d pod(s) admitted without its sidecar", want)

		waitPodSet(t, ps, 5, 3*time.Minute)
		load.waitMade(t, atActed+20)
		load.Stop()
		schedLoad.Stop()

		if took > leaseTakenBound {
			t.Errorf("round %d: the standby took the Lease %s after the kill; want within %s (lease duration %s, two jittered retry periods of %s, two API calls)", round, took, leaseTakenBound, leaseDuration, retryPeriod)
		}
		made, notInjected, failed, first := load.Result()
		if notInjected != roundMissed {
			t.Errorf("round %d: %d pod(s) were admitted without their sidecar once the standby led (%d before), first %s", round, notInjected-roundMissed, roundMissed, first)
		}
		if failed > 0 {
			t.Errorf("round %d: %d of %d pod creates failed (the pod webhook fails open), first %s", round, failed, made, first)
		}
		if during := atActed - atKill; during < 20 {
			t.Errorf("round %d: only %d pods were created between the kill and the standby's first action", round, during)
		}
		schedMade, schedRefused := schedLoad.Result()
		pods += made
		missed += notInjected
		perRound = append(perRound, notInjected)
		schedules += schedMade
		refused += schedRefused
		takeovers = append(takeovers, took.Round(100*time.Millisecond))
		acts = append(acts, acted.Round(100*time.Millisecond))
		leaseToAct = append(leaseToAct, (acted - took).Round(100*time.Millisecond))
		reports = append(reports, reported.Round(100*time.Millisecond))
		proxyRefused, _ := proxy.Failed()
		t.Logf("round %d: %s took the lease %s after the kill (was %s), scaled up %s after, status counted the misses %s after; %d pods (%d before the kill, %d until the standby acted): %d without their sidecar; %d RestartSchedule creates, %d refused; proxy: %d connections to the killed replica, %d to the standby, %d refused in all",
			round, newID, took, leaderID, acted, reported, made, atKill, atActed-atKill, notInjected, schedMade, schedRefused, proxy.Served(leader.port), proxy.Served(standby.port), proxyRefused)
		if err := warmedBeforeLeading(standby.Logs(1 << 20)); err != nil {
			t.Errorf("round %d: %v", round, err)
		}
		leader, leaderID = standby, newID
	}
	figure(t, "%d leader failover(s) (SIGKILL) behind a kube-proxy-like proxy (endpoint dropped %s after the process dies): lease taken over after %v (bound %s), the standby acted (scale-up started) after %v, %v after taking the Lease; %d pods created at 10/s: %d admitted without their sidecar (per round %v), all counted in status.notInjectedPods %v after the kill; %d RestartSchedule creates, %d refused",
		rounds, endpointDelay, takeovers, leaseTakenBound, acts, leaseToAct, pods, missed, perRound, reports, schedules, refused)
}

// warmedBeforeLeading checks, from a replica's log, that it started the
// PodSet controller's sources (informers and queue) before it took the
// Lease: a warm standby (--leader-election-warm-standby, the default) only
// starts its workers on taking it, where a cold one first lists every pod.
func warmedBeforeLeading(log string) error {
	warmed, led := -1, -1
	for i, line := range strings.Split(log, "\n") {
		switch {
		case warmed < 0 && strings.Contains(line, `"msg":"Starting EventSource"`) && strings.Contains(line, `"controller":"podset"`):
			warmed = i
		case led < 0 && strings.Contains(line, `"msg":"Successfully acquired lease"`):
			led = i
		}
	}
	switch {
	case led < 0:
		return errors.New("the standby's log has no \"Successfully acquired lease\" line")
	case warmed < 0:
		return errors.New("the standby's log never starts the podset controller's sources")
	case warmed > led:
		return fmt.Errorf("the standby started the podset controller's sources after it took the Lease (log lines %d and %d): it was not warm", warmed+1, led+1)
	}
	return nil
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
	// The restarted API server refuses the manager until its authorizer has
	// synced; what it grants once synced is no missing permission.
	testenv.FailOnRefusals(t, suite.cluster.ManagerRefusals).ForgiveWarmUp(suite.client)
	n := scaled(20, 100)
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
