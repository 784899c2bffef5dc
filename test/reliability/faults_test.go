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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// Leader election as the manager binary configures it (controller-runtime
// defaults): a lease of 15s, renewed every 2s.
const (
	leaseDuration = 15 * time.Second
	// failoverBound is how soon the other manager must lead after the
	// leader dies: the lease must expire, then one retry period (2s), plus
	// generous slack for this shared 2-core machine.
	failoverBound = leaseDuration + 15*time.Second
	leaseName     = "deckhand.apps.deckhand.dev"
)

func podSetPods(ctx context.Context, ns string, uid types.UID) (active, ready int, err error) {
	var pods corev1.PodList
	if err := suite.client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if controlledBy(p, uid) && podActive(p) {
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
		active, ready, err := podSetPods(ctx, ps.Namespace, ps.UID)
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

// TestLeaderFailover runs two managers with leader election, kills the
// leader with SIGKILL and checks that the other one leads within the lease
// duration + a few seconds, resumes the pending work (a scale-up requested
// right after the kill), and that admission never failed meanwhile.
//
// Every replica serves webhooks. The local API server can call only one URL
// per webhook (in a cluster a Service spreads the calls over every ready
// replica), so the webhook configurations point at the manager that stays
// up: that is the replica a Service would keep routing to once the killed
// one's readiness probe fails.
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
	start := func(name string) (*localcluster.DeckhandProcess, int) {
		port, err := localcluster.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		d, err := suite.cluster.StartDeckhand(testutil.Context(t, 3*time.Minute), localcluster.DeckhandOptions{
			Binary: suite.bin, WebhookPort: port, CertDir: suite.certDir, Name: name,
			Args: []string{"--leader-elect=true"},
		})
		if err != nil {
			t.Fatalf("starting %s: %v", name, err)
		}
		t.Cleanup(d.Stop)
		return d, port
	}

	leader, _ := start("deckhand-a")
	var leaderID string
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		h, err := leaseHolder(ctx)
		leaderID = h
		return h != "", err
	}, "the first manager holds the lease")

	var failovers []time.Duration
	var resumes []time.Duration
	for round := range rounds {
		standby, standbyPort := start(fmt.Sprintf("deckhand-%c", 'b'+round))
		if err := installWebhooks(testutil.Context(t, time.Minute), standbyPort); err != nil {
			t.Fatal(err)
		}
		ps := simplePodSet(ns, fmt.Sprintf("failover-%d", round), 2)
		retry(t, time.Minute, "creating a PodSet", func(ctx context.Context) error { return suite.client.Create(ctx, ps) })
		waitPodSet(t, ps, 2, 3*time.Minute)

		// Admission requests all through the failover.
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var admitted int
		var admissionErrs []string
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				r := &deckhandv1alpha1.RestartSchedule{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("adm-%d-%d", round, i), Namespace: ns},
					Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "0 3 * * *", Suspend: true,
						Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: "x"}}},
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				err := suite.client.Create(ctx, r)
				cancel()
				mu.Lock()
				if err != nil {
					admissionErrs = append(admissionErrs, err.Error())
				} else {
					admitted++
				}
				mu.Unlock()
			}
		}()
		time.Sleep(time.Second)

		killed := time.Now()
		leader.Kill()
		scalePodSet(t, ps, 5) // pending work for the next leader
		var newID string
		testutil.Eventually(t, 2*failoverBound, func(ctx context.Context) (bool, error) {
			h, err := leaseHolder(ctx)
			newID = h
			return h != "" && h != leaderID, err
		}, "the standby manager takes the lease")
		took := time.Since(killed)
		waitPodSet(t, ps, 5, 3*time.Minute)
		resumed := time.Since(killed)
		close(stop)
		wg.Wait()
		if took > failoverBound {
			t.Errorf("round %d: the standby led %s after the kill; want within %s (lease duration %s + 15s)", round, took, failoverBound, leaseDuration)
		}
		if len(admissionErrs) > 0 {
			t.Errorf("round %d: %d of %d admission requests failed during the failover, first: %s",
				round, len(admissionErrs), admitted+len(admissionErrs), admissionErrs[0])
		}
		if admitted < 5 {
			t.Errorf("round %d: only %d admission requests were made during the failover", round, admitted)
		}
		failovers = append(failovers, took.Round(100*time.Millisecond))
		resumes = append(resumes, resumed.Round(100*time.Millisecond))
		t.Logf("round %d: %s led %s after the kill (was %s), scale-up done %s after; %d admissions, none failed", round, newID, took, leaderID, resumed, admitted)
		leader, leaderID = standby, newID
	}
	figure(t, "%d leader failover(s): lease taken over after %v (bound %s), pending scale-up done after %v, 0 admission errors",
		rounds, failovers, failoverBound, resumes)
	leader.Stop()
}

// TestAPIServerRestart restarts kube-apiserver while the manager is scaling
// a PodSet: the manager process survives (same pid) and converges.
func TestAPIServerRestart(t *testing.T) {
	ensureDeckhand(t)
	ns := testutil.Namespace(t, suite.client)
	refusals := testenv.FailOnRefusals(t, suite.cluster.ManagerRefusals)
	n := int32(20)
	if stress() {
		n = 100
	}
	ps := simplePodSet(ns, "apiserver-restart", n)
	retry(t, time.Minute, "creating a PodSet", func(ctx context.Context) error { return suite.client.Create(ctx, ps) })
	pid := suite.deckhand.Pid()
	// Restart at once, mid-way through creating the pods.
	if err := suite.cluster.RestartAPIServer(testutil.Context(t, 3*time.Minute), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	// The restarted API server refused the manager's watches until it was
	// ready; from here on every refusal counts.
	refusals.Excuse()
	back := time.Now()
	atBack, _, err := podSetPods(testutil.Context(t, time.Minute), ns, ps.UID)
	if err != nil {
		t.Fatal(err)
	}
	waitPodSet(t, ps, int(n), 5*time.Minute)
	recovered := time.Since(back)
	scalePodSet(t, ps, 3)
	waitPodSet(t, ps, 3, 3*time.Minute)
	if suite.deckhand.Exited() || suite.deckhand.Pid() != pid {
		t.Fatalf("the manager restarted or exited during the API server restart:\n%s", suite.deckhand.Logs(40))
	}
	figure(t, "kube-apiserver restarted (3s down) while scaling a PodSet to %d (%d pods existed when it was back): the manager kept running (same pid) and converged %s after the API server was back",
		n, atBack, recovered.Round(100*time.Millisecond))
}

// TestWebhookUnavailable: with Deckhand down, pods are still created (the
// pod webhook's failurePolicy is Ignore), without sidecars; once Deckhand is
// back the SidecarSet's status counts them in notInjectedPods.
func TestWebhookUnavailable(t *testing.T) {
	ensureDeckhand(t)
	ns := namespace(t)
	labels := map[string]string{"app": "webhook-down"}
	s := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "down-" + ns},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace: ns, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "sidecar", Image: "sidecar:1"}}},
		},
	}
	retry(t, time.Minute, "creating the SidecarSet", func(ctx context.Context) error { return suite.client.Create(ctx, s) })
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), s) })
	newPod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}}}
	}
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		p := newPod("probe")
		if err := suite.client.Create(ctx, p, client.DryRunAll); err != nil {
			return false, err
		}
		return len(p.Spec.Containers) == 2, nil
	}, "the pod webhook injects (its cache has the SidecarSet)")
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
