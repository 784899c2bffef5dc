package reliability

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// plannedDrain is the --shutdown-drain of the replicas behind kubeProxy:
// longer than endpointDelay plus a probe period, as the default (10s) is
// longer than endpoint propagation in a cluster.
const plannedDrain = 3 * time.Second

// podLoad creates pods a SidecarSet selects, 10 a second in bursts of 5
// every 500ms (as a ReplicaSet creates pods in batches), each create on its
// own, and records every pod admitted without its sidecar: the pod
// webhook's failurePolicy Ignore admits a pod whose webhook call failed.
// Bursts make the API server hold several connections to the webhook, so
// a stop changes which replicas its new connections reach.
type podLoad struct {
	stop chan struct{}
	wg   sync.WaitGroup

	mu          sync.Mutex
	made        int
	notInjected []string
	errs        []string
}

const (
	loadBurst  = 5
	loadPeriod = 500 * time.Millisecond
)

func startPodLoad(t *testing.T, ns, prefix string, podLabels map[string]string) *podLoad {
	l := &podLoad{stop: make(chan struct{})}
	l.wg.Go(func() {
		tick := time.NewTicker(loadPeriod)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			for j := range loadBurst {
				l.wg.Go(func() { l.create(ns, fmt.Sprintf("%s-%d-%d", prefix, i, j), podLabels) })
			}
		}
	})
	t.Cleanup(l.Stop)
	return l
}

func (l *podLoad) create(ns, name string, podLabels map[string]string) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: podLabels},
		// Never scheduled: the fake nodes have nothing to run.
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"deckhand.dev/no-such-node": "true"},
			Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := suite.client.Create(ctx, p)
	cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.made++
	switch {
	case err != nil:
		l.errs = append(l.errs, err.Error())
	case len(p.Spec.Containers) != 2:
		l.notInjected = append(l.notInjected, p.Name)
	}
}

// Made is how many pods were created (or refused) so far.
func (l *podLoad) Made() int { l.mu.Lock(); defer l.mu.Unlock(); return l.made }

// Stop ends the load once the creates in flight have returned.
func (l *podLoad) Stop() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// waitMade waits until the load has made n pods in all.
func (l *podLoad) waitMade(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, 2*time.Minute, func(context.Context) (bool, error) {
		return l.Made() >= n, nil
	}, "%d pods are created", n)
}

// Result is what the load saw: pods made, pods without their sidecar
// (and the first of them), failed creates (and the first).
func (l *podLoad) Result() (made, notInjected, failed int, first string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case len(l.notInjected) > 0:
		first = "without its sidecar: " + l.notInjected[0]
	case len(l.errs) > 0:
		first = "failed: " + l.errs[0]
	}
	return l.made, len(l.notInjected), len(l.errs), first
}

// replica is a manager behind kubeProxy.
type replica struct {
	*localcluster.DeckhandProcess
	port int // webhook port
}

// behindProxy stops the suite's manager and points the webhook
// configurations at a new kubeProxy, both restored when t ends.
func behindProxy(t *testing.T) *kubeProxy {
	t.Helper()
	suite.deckhand.Stop()
	t.Cleanup(func() {
		if err := installWebhooks(context.Background(), suite.port); err != nil {
			t.Errorf("restoring the webhooks: %v", err)
		}
		ensureDeckhand(t)
	})
	proxy := startKubeProxy(t)
	if err := installWebhooks(testutil.Context(t, time.Minute), proxy.Port()); err != nil {
		t.Fatal(err)
	}
	return proxy
}

// startReplica starts a manager with leader election and the given args,
// as a new pod of the proxy's Service.
func startReplica(t *testing.T, proxy *kubeProxy, name string, args ...string) replica {
	t.Helper()
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	d := startManager(t, name, port, append([]string{"--leader-elect=true"}, args...)...)
	proxy.Add(d, port)
	return replica{DeckhandProcess: d, port: port}
}

// sigterm stops r as the kubelet does a planned stop (SIGTERM, no
// SIGKILL before the test's bound) and returns how long it took.
func sigterm(t *testing.T, r replica) time.Duration {
	t.Helper()
	began := time.Now()
	if err := syscall.Kill(r.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Done():
	case <-time.After(plannedDrain + 30*time.Second):
		t.Fatalf("the replica did not stop within %s of SIGTERM:\n%s", plannedDrain+30*time.Second, r.Logs(40))
	}
	return time.Since(began)
}

// TestPlannedStop runs two managers behind kubeProxy, creates pods a
// SidecarSet selects at 10 a second (podLoad), and SIGTERMs the replica the API
// server has connections open to: while its endpoint is still listed (endpointDelay
// after its /readyz fails) new connections still reach it, so it must keep
// serving until every endpoint list has dropped it. No pod may be admitted
// without its sidecar and no create may fail.
func TestPlannedStop(t *testing.T) {
	ns := namespace(t)
	proxy := behindProxy(t)
	drain := "--shutdown-drain=" + plannedDrain.String()
	a := startReplica(t, proxy, "deckhand-stop-a", drain)
	b := startReplica(t, proxy, "deckhand-stop-b", drain)
	proxy.waitEndpoints(t, a.port, b.port)
	podLabels := map[string]string{"app": "planned-stop"}
	createSidecarSet(t, "planned-stop-"+ns, ns, podLabels)

	load := startPodLoad(t, ns, "stop", podLabels)
	load.waitMade(t, 20)
	// The replica the API server's connections are open to: stopping the
	// other one would test nothing.
	victim, stays := a, b
	if proxy.Open(b.port) > proxy.Open(a.port) {
		victim, stays = b, a
	}
	atStop, openAtStop := proxy.Served(victim.port), proxy.Open(victim.port)
	stopped := sigterm(t, victim)
	load.waitMade(t, load.Made()+20)
	load.Stop()
	proxy.waitEndpoints(t, stays.port)
	during := proxy.Served(victim.port) - atStop

	made, notInjected, failed, first := load.Result()
	refused, dropped := proxy.Failed()
	if notInjected > 0 || failed > 0 {
		t.Errorf("%d of %d pods admitted without their sidecar, %d creates failed; first %s", notInjected, made, failed, first)
	}
	if openAtStop == 0 {
		t.Errorf("the API server had no connection open to the replica stopped: the stop was not exercised")
	}
	figure(t, "SIGTERM of one of 2 replicas behind a kube-proxy-like proxy (endpoint dropped %s after /readyz fails, --shutdown-drain=%s): %d pods created at 10/s in bursts of 5, %d without their sidecar, %d failed; %d connections open to the stopping replica at the signal, %d new ones sent to it after, %d refused; stopped %s after SIGTERM",
		endpointDelay, plannedDrain, made, notInjected, failed, openAtStop, during, refused+dropped, stopped.Round(100*time.Millisecond))
}

// TestRollingUpgrade replaces two managers behind kubeProxy one at a time,
// as a Deployment's rollout does: SIGTERM one, start its replacement, wait
// until the replacement is an endpoint, then the other. Pods a SidecarSet
// selects are created at 10 a second all through: none may be admitted
// without its sidecar and no create may fail.
func TestRollingUpgrade(t *testing.T) {
	ns := namespace(t)
	proxy := behindProxy(t)
	drain := "--shutdown-drain=" + plannedDrain.String()
	olds := []replica{startReplica(t, proxy, "deckhand-old-a", drain), startReplica(t, proxy, "deckhand-old-b", drain)}
	proxy.waitEndpoints(t, olds[0].port, olds[1].port)
	podLabels := map[string]string{"app": "rolling-upgrade"}
	createSidecarSet(t, "rolling-upgrade-"+ns, ns, podLabels)

	load := startPodLoad(t, ns, "roll", podLabels)
	load.waitMade(t, 20)
	began := time.Now()
	var news []replica
	for i, old := range olds {
		sigterm(t, old)
		news = append(news, startReplica(t, proxy, fmt.Sprintf("deckhand-new-%c", 'a'+i), drain))
		want := []int{news[i].port}
		if i == 0 {
			want = append(want, olds[1].port)
		} else {
			want = append(want, news[0].port)
		}
		proxy.waitEndpoints(t, want...)
	}
	took := time.Since(began)
	load.waitMade(t, load.Made()+20)
	load.Stop()

	made, notInjected, failed, first := load.Result()
	refused, dropped := proxy.Failed()
	if notInjected > 0 || failed > 0 {
		t.Errorf("%d of %d pods admitted without their sidecar, %d creates failed; first %s", notInjected, made, failed, first)
	}
	served := 0
	for _, r := range olds {
		served += proxy.Served(r.port)
	}
	figure(t, "rolling upgrade of 2 replicas behind a kube-proxy-like proxy (SIGTERM, replacement started and listed, then the next; --shutdown-drain=%s) in %s: %d pods created at 10/s in bursts of 5, %d without their sidecar, %d failed; connections: %d to the old replicas, %d to the new, %d refused",
		plannedDrain, took.Round(100*time.Millisecond), made, notInjected, failed, served, proxy.Served(news[0].port)+proxy.Served(news[1].port), refused+dropped)
}
