package reliability

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestCrashSidecarSetEvictRollout changes a sidecar's env (only recreating
// the pods applies it) under updateStrategy.recreate: Evict, over a
// Deployment whose PodDisruptionBudget allows one disruption, while the
// manager is SIGKILLed at random moments; the env is changed again each
// time a rollout completes until the kills are done. A watch over the pods
// checks that never more than one of them is unavailable (the PDB, which
// kube-controller-manager's disruption controller computes and the API
// server enforces on every eviction), that no pod is deleted twice, and
// that exactly one pod is deleted per pod and per rollout: nothing is
// evicted that did not need it, whatever the kills interrupted. The
// rollouts converge: every pod ends with the last env.
func TestCrashSidecarSetEvictRollout(t *testing.T) {
	minKills, minGap, maxGap := killPlan()
	n := 4
	if stress() {
		n = 12
	}
	ns := namespace(t)
	podLabels := map[string]string{"app": "crash-evict"}
	s := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "crash-evict-" + ns},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace: ns,
			Selector:  &metav1.LabelSelector{MatchLabels: podLabels},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "sidecar", Image: "sidecar:1",
				Env: []corev1.EnvVar{{Name: "VERSION", Value: "1"}}}}},
			// The controller's own budget is larger than the PDB's: the PDB
			// is what must hold.
			UpdateStrategy: deckhandv1alpha1.SidecarSetUpdateStrategy{
				MaxUnavailable: ptr.To(intstr.FromInt32(2)),
				Recreate:       deckhandv1alpha1.RecreateEvict,
			},
		},
	}
	retry(t, 2*time.Minute, "creating the SidecarSet", func(ctx context.Context) error { return suite.client.Create(ctx, s) })
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), s) })
	waitInjects(t, ns, podLabels)
	ctx := testutil.Context(t, 30*time.Minute)
	testutil.Create(ctx, t, suite.client, testutil.Deployment(ns, "app", int32(n), podLabels, corev1.Container{Name: "app", Image: "app:1"}))
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: podLabels}},
	}
	testutil.Create(ctx, t, suite.client, pdb)

	// version reports the env VERSION of a pod's sidecar.
	version := func(p *corev1.Pod) string {
		for _, c := range p.Spec.Containers {
			if c.Name == "sidecar" && len(c.Env) == 1 {
				return c.Env[0].Value
			}
		}
		return ""
	}
	waitAll := func(v string) {
		t.Helper()
		testutil.Eventually(t, 10*time.Minute, func(ctx context.Context) (bool, error) {
			pods, err := testutil.LivePods(ctx, suite.client, ns, podLabels)
			if err != nil {
				return false, err
			}
			at := 0
			for i := range pods {
				if version(&pods[i]) == v && podutil.IsPodReady(&pods[i]) {
					at++
				}
			}
			return orErr(at == n && len(pods) == n, fmt.Errorf("%d of %d pods (of %d live) Ready with VERSION=%s", at, n, len(pods), v))
		}, "every pod Ready with VERSION=%s", v)
	}
	waitAll("1")
	testutil.Eventually(t, 2*time.Minute, func(ctx context.Context) (bool, error) {
		got := &policyv1.PodDisruptionBudget{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(pdb), got); err != nil {
			return false, err
		}
		return orErr(got.Status.ObservedGeneration == got.Generation && got.Status.CurrentHealthy == int32(n),
			fmt.Errorf("PDB status %+v", got.Status))
	}, "the disruption controller computes the PDB's status")

	w := testutil.WatchDisruptions(t, suite.clientset, ns, labels.SelectorFromSet(podLabels), n)
	// A pod its Deployment creates while the manager is down is admitted
	// without its sidecar (failurePolicy Ignore) and needs an eviction of its
	// own: those are the only deletions allowed beyond one per pod and rollout.
	var bareMu sync.Mutex
	bare := map[types.UID]string{}
	noteBare := func(p *corev1.Pod) {
		if version(p) == "" {
			bareMu.Lock()
			bare[p.UID] = p.Name
			bareMu.Unlock()
		}
	}
	stopBare := testutil.WatchPods(t, suite.clientset, ns, noteBare, func(_ watch.EventType, p *corev1.Pod) { noteBare(p) })
	setVersion := func(v string) {
		retry(t, 3*time.Minute, "changing the sidecar env", func(ctx context.Context) error {
			cur := &deckhandv1alpha1.SidecarSet{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
				return err
			}
			cur.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "VERSION", Value: v}}
			return suite.client.Update(ctx, cur)
		})
	}
	start := time.Now()
	c := startChaos(t, minGap, maxGap, minKills)
	rollouts := 0
	for v := 2; ; v++ {
		setVersion(fmt.Sprint(v))
		rollouts++
		waitAll(fmt.Sprint(v))
		if c.Kills() >= minKills {
			break
		}
	}
	kills := c.Stop(t)
	testutil.Eventually(t, 5*time.Minute, func(ctx context.Context) (bool, error) {
		cur := &deckhandv1alpha1.SidecarSet{}
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(s), cur); err != nil {
			return false, err
		}
		st := cur.Status
		return orErr(st.ObservedGeneration == cur.Generation && st.UpdatedReadyPods == int32(n) && st.MatchedPods == int32(n) &&
			st.NotUpdatablePods == 0 && st.EvictingPods == 0, fmt.Errorf("status %+v", st))
	}, "the SidecarSet reports all %d pods updated and ready, none evicting", n)
	w.Stop()

	if m := w.MaxUnavailable(); m > 1 {
		t.Errorf("%d of %d pods unavailable at once; the PodDisruptionBudget allows 1:\n%s", m, n, w.History())
	}
	deleted, names := w.Deleted()
	seen := map[types.UID]bool{}
	for _, uid := range deleted {
		if seen[uid] {
			t.Errorf("pod %s deleted twice", names[uid])
		}
		seen[uid] = true
	}
	stopBare()
	bareDeleted := 0
	for _, uid := range deleted {
		if _, ok := bare[uid]; ok {
			bareDeleted++
		}
	}
	if len(deleted) != n*rollouts+bareDeleted {
		t.Errorf("%d pods deleted over %d rollouts of %d pods (%d of them admitted without the sidecar while the manager was down), want exactly %d (one per pod and rollout, plus those)",
			len(deleted), rollouts, n, bareDeleted, n*rollouts+bareDeleted)
	}
	figure(t, "SidecarSet recreate: Evict over %d pods under a PDB of maxUnavailable 1: %d rollouts, %d evictions (%d of pods admitted without the sidecar while the manager was down), %d SIGKILLs survived, at most %d unavailable, %s",
		n, rollouts, len(deleted), bareDeleted, kills, w.MaxUnavailable(), time.Since(start).Round(time.Second))
}
