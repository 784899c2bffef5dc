package reliability

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestCrashPodSetScaleAndRollingUpdate scales a PodSet 0 -> n -> (rolling
// template update) -> 0, in cycles, while the manager is SIGKILLed at random
// moments. A watch over every pod of the namespace checks throughout that
// there are never more active pods than replicas (+ maxSurge during the
// update) and, during the update, never more unavailable than
// maxUnavailable, counting every pod its selector matches that no other
// object controls; pods of a bystander Deployment with the same labels are
// never touched; no pod of the PodSet (by owner reference, name or labels)
// is left once it is deleted.
func TestCrashPodSetScaleAndRollingUpdate(t *testing.T) {
	// The loop below runs cycles until minKills kills have happened;
	// cycleDeadline only bounds it. A bound in time, not in cycles: a cycle
	// of 30 pods takes about a second on a quiet machine and several on a
	// loaded one, while the kills come every minGap-maxGap whatever the
	// machine. Four times the longest gaps leaves room for the restarts
	// between them on a loaded machine.
	n, minKills := 30, 2
	minGap, maxGap := 3*time.Second, 8*time.Second
	if stress() {
		n, minKills = 300, 20
		minGap, maxGap = 2*time.Second, 10*time.Second
	}
	// Each kill also waits for the restarted manager to take the leader
	// Lease, which the killed one left to expire.
	cycleDeadline := time.Duration(minKills+1) * (maxGap + failoverBound) * 4
	keepManagerLog(t)
	surge, unavailable := max(1, n/10), max(1, n/10)
	ns := namespace(t)
	podLabels := map[string]string{"app": "crash-podset"}
	by := createBystanders(t, ns, podLabels)
	w := watchPods(t, ns)

	ps := testutil.PodSet(ns, "crash", 0, podLabels, corev1.Container{
		Name: "app", Image: "app:1", Env: []corev1.EnvVar{{Name: "VERSION", Value: "0"}},
	})
	ps.Spec.UpdateStrategy = deckhandv1alpha1.PodSetUpdateStrategy{
		Type:              deckhandv1alpha1.RollingUpdatePodSetStrategyType,
		MaxSurge:          ptr.To(intstr.FromInt32(int32(surge))),
		MaxUnavailable:    ptr.To(intstr.FromInt32(int32(unavailable))),
		InPlaceIfPossible: ptr.To(false),
	}
	retry(t, 2*time.Minute, "creating the PodSet", func(ctx context.Context) error { return suite.client.Create(ctx, ps) })
	uid := ps.UID

	// The invariants, over every pod the PodSet's selector matches that no
	// other object controls: a pod created without its owner reference
	// counts too. The bystander Deployment's pods, with the same labels, have
	// their ReplicaSet; the bystander pod has other labels.
	sel := labels.SelectorFromSet(podLabels)
	mine := func(pods map[string]*corev1.Pod) (active, ready int, versions map[string]int) {
		versions = map[string]int{}
		for _, p := range pods {
			if !selects(sel, uid, p) {
				continue
			}
			active++
			if podutil.IsPodReady(p) {
				ready++
			}
			for _, e := range p.Spec.Containers[0].Env {
				if e.Name == "VERSION" {
					versions[e.Value]++
				}
			}
		}
		return active, ready, versions
	}
	var c *chaos
	scaleCheck := func(bound int) func(map[string]*corev1.Pod) error {
		return func(pods map[string]*corev1.Pod) error {
			if active, _, _ := mine(pods); active > bound {
				return fmt.Errorf("%d active pods, more than the %d replicas (%s)", active, bound, newestPods(pods, sel, uid, c))
			}
			return nil
		}
	}
	updateCheck := func(pods map[string]*corev1.Pod) error {
		active, ready, _ := mine(pods)
		if active > n+surge {
			return fmt.Errorf("%d active pods during the update, more than %d replicas + %d maxSurge", active, n, surge)
		}
		if n-ready > unavailable {
			return fmt.Errorf("%d of %d pods unavailable during the update, more than maxUnavailable %d", n-ready, n, unavailable)
		}
		return nil
	}
	// waitPods waits, on the watch's own view, for the PodSet's pods to be
	// exactly want active and ready at version.
	waitPods := func(want int, version string) {
		t.Helper()
		testutil.Eventually(t, 10*time.Minute, func(context.Context) (bool, error) {
			w.assertHeld(t) // a violation fails at once, not when the wait times out
			w.mu.Lock()
			active, ready, versions := mine(w.pods)
			w.mu.Unlock()
			if active == want && ready == want && (want == 0 || versions[version] == want) {
				return true, nil
			}
			return false, fmt.Errorf("active %d, ready %d, by version %v", active, ready, versions)
		}, "the PodSet has %d ready pods at version %s", want, version)
	}
	update := func(what string, mutate func(*deckhandv1alpha1.PodSet)) {
		t.Helper()
		retry(t, 3*time.Minute, what, func(ctx context.Context) error {
			cur := &deckhandv1alpha1.PodSet{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ps), cur); err != nil {
				return err
			}
			mutate(cur)
			return suite.client.Update(ctx, cur)
		})
	}

	start := time.Now()
	c = startChaos(t, minGap, maxGap, 0)
	cycles := 0
	for version := 1; time.Since(start) < cycleDeadline; version++ {
		cycles++
		w.setCheck(scaleCheck(n))
		update("scaling up", func(p *deckhandv1alpha1.PodSet) { p.Spec.Replicas = ptr.To(int32(n)) })
		waitPods(n, strconv.Itoa(version-1))

		w.setCheck(updateCheck)
		update("updating the template", func(p *deckhandv1alpha1.PodSet) {
			p.Spec.Template.Spec.Containers[0].Env[0].Value = strconv.Itoa(version)
		})
		waitPods(n, strconv.Itoa(version))

		w.setCheck(scaleCheck(n))
		update("scaling down", func(p *deckhandv1alpha1.PodSet) { p.Spec.Replicas = ptr.To(int32(0)) })
		waitPods(0, "")
		if c.Kills() >= minKills {
			break
		}
	}
	kills := c.Stop(t)
	w.assertHeld(t)
	if kills < minKills {
		t.Fatalf("only %d kills in %d cycles (%s); want at least %d", kills, cycles, time.Since(start).Round(time.Second), minKills)
	}
	takeovers := c.Takeovers()
	slices.Sort(takeovers)
	figure(t, "%d pods, %d cycles (scale 0->%d, rolling update maxSurge %d maxUnavailable %d, scale ->0), %d SIGKILLs survived (the restarted manager led %s-%s after each), %d pod events checked, %s",
		n, cycles, n, surge, unavailable, kills, takeovers[0].Round(100*time.Millisecond), takeovers[len(takeovers)-1].Round(100*time.Millisecond),
		w.Events(), time.Since(start).Round(time.Second))

	// Scale up once more and delete the PodSet: nothing it owned is left.
	update("scaling up before deletion", func(p *deckhandv1alpha1.PodSet) { p.Spec.Replicas = ptr.To(int32(min(n, 20))) })
	testutil.Eventually(t, 5*time.Minute, func(context.Context) (bool, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		a, _, _ := mine(w.pods)
		return a == min(n, 20), nil
	}, "the PodSet has %d pods again", min(n, 20))
	retry(t, 2*time.Minute, "deleting the PodSet", func(ctx context.Context) error { return client.IgnoreNotFound(suite.client.Delete(ctx, ps)) })
	assertNoLeftovers(t, ns, deletedOwner{what: "the PodSet", uid: uid, name: ps.Name, selector: sel, podsOnly: true})
	by.assertUntouched(t)
}

// newestPods describes, for a violation's message, the three newest pods
// sel selects and when the manager was last killed: a pod created just
// after a kill points at a create the killed process had in flight.
func newestPods(pods map[string]*corev1.Pod, sel labels.Selector, uid types.UID, c *chaos) string {
	var mine []*corev1.Pod
	for _, p := range pods {
		if selects(sel, uid, p) {
			mine = append(mine, p)
		}
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].CreationTimestamp.After(mine[j].CreationTimestamp.Time) })
	var b strings.Builder
	for _, p := range mine[:min(3, len(mine))] {
		fmt.Fprintf(&b, "%s created %s; ", p.Name, p.CreationTimestamp.Format(time.RFC3339))
	}
	if c != nil && !c.LastKill().IsZero() {
		fmt.Fprintf(&b, "last kill %s", c.LastKill().Format(time.RFC3339Nano))
	} else {
		b.WriteString("no kill yet")
	}
	return b.String()
}

// keepManagerLog copies the manager's log (every process the suite has
// started, appended) into t's artifact directory when t ends, so that a
// run with -artifacts keeps what each process did around a violation.
func keepManagerLog(t *testing.T) {
	dir := t.ArtifactDir()
	t.Cleanup(func() {
		if err := os.WriteFile(filepath.Join(dir, "deckhand.log"), []byte(suite.deckhand.Logs(math.MaxInt)), 0o600); err != nil {
			t.Logf("keeping the manager log: %v", err)
		}
	})
}
