package sidecarset_test

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	"github.com/deckhand-dev/deckhand/test/health"
)

// The tests of this file are about updateStrategy.recreate: Evict (pods that
// cannot reach the latest revision in place are evicted for their
// controllers to recreate) and about resource changes applied in place
// through the pod resize subresource.
//
// PodDisruptionBudgets are real: the package's cluster runs
// kube-controller-manager, whose disruption controller computes their
// status, and the API server's Eviction API enforces them.

// deployApp creates a Deployment of replicas pods of the scenario's app and
// waits until they are all Ready.
func (sc *scenario) deployApp(replicas int32) *appsv1.Deployment {
	sc.t.Helper()
	d := testutil.Deployment(sc.ns, sc.app, replicas, map[string]string{"app": sc.app}, corev1.Container{Name: "app", Image: "app:1"})
	testutil.Create(ctxT(sc.t), sc.t, env.Client, d)
	sc.waitReadyPods(int(replicas))
	return d
}

// waitReadyPods waits until exactly n pods of the scenario's app are live
// and Ready.
func (sc *scenario) waitReadyPods(n int) []corev1.Pod {
	sc.t.Helper()
	return testutil.WaitReadyPods(sc.t, env.Client, sc.ns, map[string]string{"app": sc.app}, n)
}

// createPDB creates a PodDisruptionBudget over the scenario's app and waits
// until the disruption controller has computed its status for expected
// pods.
func (sc *scenario) createPDB(maxUnavailable int32, expected int32) {
	sc.t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: sc.ns, Name: sc.app},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: podCount(maxUnavailable),
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": sc.app}},
		},
	}
	testutil.Create(ctxT(sc.t), sc.t, env.Client, pdb)
	testutil.Eventually(sc.t, 60*time.Second, func(ctx context.Context) (bool, error) {
		got := &policyv1.PodDisruptionBudget{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pdb), got); err != nil {
			return false, err
		}
		return got.Status.ObservedGeneration == got.Generation && got.Status.ExpectedPods == expected && got.Status.CurrentHealthy == expected, nil
	}, "the disruption controller computes the status of PDB %s/%s", sc.ns, sc.app)
}

// getPDB reads the scenario's PodDisruptionBudget.
func (sc *scenario) getPDB() *policyv1.PodDisruptionBudget {
	sc.t.Helper()
	pdb := &policyv1.PodDisruptionBudget{}
	if err := env.Client.Get(ctxT(sc.t), client.ObjectKey{Namespace: sc.ns, Name: sc.app}, pdb); err != nil {
		sc.t.Fatal(err)
	}
	return pdb
}

// proxyEnv is the value of MODE in the environment of p's proxy container.
func proxyEnv(p *corev1.Pod) string {
	if c := podutil.FindContainer(p.Spec.Containers, "proxy"); c != nil {
		for _, e := range c.Env {
			if e.Name == "MODE" {
				return e.Value
			}
		}
	}
	return ""
}

// TestRecreateEvictHonoursPDB changes a sidecar's env (not updatable in
// place) under recreate: Evict with a maxUnavailable of 3 over a Deployment
// of 3 pods that a PodDisruptionBudget allows only one disruption of: the
// PDB is what paces the rollout. From a watch, never more than one pod is
// unavailable (not Ready or being deleted, or gone and not yet replaced),
// every old pod is deleted exactly once, no new pod is deleted, and the
// three pods that remain carry the new env. The status and Events show the
// evictions the PDB refused.
func TestRecreateEvictHonoursPDB(t *testing.T) {
	sc := newScenario(t, "pdb", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Recreate = deckhandv1alpha1.RecreateEvict
		s.Spec.UpdateStrategy.MaxUnavailable = podCount(3)
	})
	sc.deployApp(3)
	sc.createPDB(1, 3)
	sc.waitStatus(60*time.Second, "3 pods matched, updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 3 && s.Status.UpdatedReadyPods == 3
	})
	old := uidSet(sc.waitReadyPods(3))
	w := testutil.WatchDisruptions(t, env.Clientset, sc.ns, labels.SelectorFromSet(labels.Set{"app": sc.app}), 3)

	// NOTE: kwok makes a replacement Ready within milliseconds, and the
	// disruption controller then gives the budget back: the controller's
	// next eviction, 10-20 ms later, was sometimes allowed, so whether the
	// budget ever refused one was a race. Until the first refusal a quota
	// holds the replacement back, so the budget stays used up.
	quota := health.LimitPods(t, env.Client, sc.ns, 2)
	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "strict"}}
	})
	// The PDB holds the evictions after the first back (the controller's
	// own budget would evict all three at once): the controller finds it
	// in the budget's status before it evicts, or, when that status lags,
	// the API server refuses the eviction; reported in an Event and in
	// status either way.
	waitEventOf(t, sc.name, map[string]string{"EvictionBlocked": "disruption budget", "DisruptionBlocked": "PodDisruptionBudget"})
	sc.waitStatus(30*time.Second, "the evictions the budget refuses counted", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.DisruptionBlockedPods > 0
	})
	if err := env.Client.Delete(ctxT(t), quota); err != nil {
		t.Fatal(err)
	}
	sc.waitStatus(3*time.Minute, "every pod recreated with the new env", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 3 && s.Status.UpdatedReadyPods == 3 && s.Status.NotUpdatablePods == 0 && s.Status.EvictingPods == 0
	})
	pods := sc.waitReadyPods(3)
	w.Stop()
	for i := range pods {
		if old[pods[i].UID] || proxyEnv(&pods[i]) != "strict" {
			t.Errorf("pod %s (old: %v) has MODE=%q, want a new pod with MODE=strict", pods[i].Name, old[pods[i].UID], proxyEnv(&pods[i]))
		}
	}
	if m := w.MaxUnavailable(); m > 1 {
		t.Errorf("%d pods were unavailable at once; the PodDisruptionBudget allows 1:\n%s", m, w.History())
	}
	for _, name := range w.UnexpectedDeletions(old) {
		t.Errorf("pod %s deleted: want each old pod deleted once and no new pod deleted", name)
	}
	// With no deletion unexpected, each one is of another old pod.
	if deleted, _ := w.Deleted(); len(deleted) != 3 {
		t.Errorf("%d pod deletions, want one of each of the 3 old pods", len(deleted))
	}
	waitEvent(t, sc.name, corev1.EventTypeNormal, "EvictingPod", "evicted pod "+sc.ns+"/")
}

// TestRecreateEvictNotInjectedAndUnmanaged creates a Deployment's pods and
// a bare pod before the SidecarSet exists (so none is injected), then a
// SidecarSet with recreate: Evict: the Deployment's pods are evicted and
// come back injected; the bare pod, which nothing would recreate, is left
// alone and reported in status and an Event.
func TestRecreateEvictNotInjectedAndUnmanaged(t *testing.T) {
	ns := env.Namespace(t)
	sc := &scenario{t: t, ns: ns, app: "late", name: "late-" + ns}
	sc.deployApp(2)
	bare := sc.create(sc.pod("bare"))
	sc.set = newSidecarSet(sc.name, ns, sc.app, "proxy:1")
	sc.set.Spec.UpdateStrategy.Recreate = deckhandv1alpha1.RecreateEvict
	createSidecarSet(t, sc.set)

	s := sc.waitStatus(3*time.Minute, "the Deployment's pods recreated and injected, the bare pod reported", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 2 && s.Status.UpdatedReadyPods == 2 && s.Status.NotInjectedPods == 1 && s.Status.UnmanagedPods == 1
	})
	if c := condition(s, "Stalled"); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "PodsNotRecreatable" {
		t.Errorf("Stalled = %+v, want True/PodsNotRecreatable", c)
	}
	got, err := sc.getPod(ctxT(t), "bare")
	if err != nil || got.UID != bare.UID || got.DeletionTimestamp != nil {
		t.Fatalf("the bare pod was touched: %v %+v", err, got.ObjectMeta)
	}
	waitEvent(t, sc.name, corev1.EventTypeWarning, "PodNotRecreatable", ns+"/bare")
	for _, p := range sc.waitReadyPods(3) {
		if p.Name != "bare" && !sidecarcontrol.ReadPodRecord(p.Annotations).Has(sc.name) {
			t.Errorf("pod %s was not recreated with the sidecars", p.Name)
		}
	}
}

// TestRecreateEvictPausedAndPartition: a paused rollout evicts nothing; once
// resumed with a partition of 1, all pods but one are recreated, and the one
// kept is never evicted.
func TestRecreateEvictPausedAndPartition(t *testing.T) {
	sc := newScenario(t, "held", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Recreate = deckhandv1alpha1.RecreateEvict
		s.Spec.UpdateStrategy.Paused = true
		s.Spec.UpdateStrategy.MaxUnavailable = podCount(3)
	})
	sc.deployApp(3)
	before := uidSet(sc.waitReadyPods(3))
	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "strict"}}
	})
	sc.waitStatus(60*time.Second, "paused, 3 pods not updatable", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return s.Status.NotUpdatablePods == 3 && c != nil && c.Reason == "UpdatePaused"
	})
	// A pod event reconciles the SidecarSet again while paused; still nothing.
	sc.create(sc.pod("nudge"))
	sc.waitStatus(60*time.Second, "the nudge pod counted", func(s *deckhandv1alpha1.SidecarSet) bool { return s.Status.MatchedPods == 4 })
	for _, p := range sc.waitReadyPods(4) {
		if p.Name != "nudge" && !before[p.UID] {
			t.Fatalf("pod %s was recreated while the rollout was paused", p.Name)
		}
	}
	if err := env.Client.Delete(ctxT(t), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: sc.ns, Name: "nudge"}}); err != nil {
		t.Fatal(err)
	}

	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.UpdateStrategy.Paused = false
		s.Spec.UpdateStrategy.Partition = podCount(1)
	})
	sc.waitStatus(3*time.Minute, "2 pods recreated, 1 held by the partition", func(s *deckhandv1alpha1.SidecarSet) bool {
		c := condition(s, deckhandv1alpha1.SidecarSetPodsUpdatedCondition)
		return s.Status.MatchedPods == 3 && s.Status.UpdatedReadyPods == 2 && s.Status.EvictingPods == 0 && c != nil && c.Reason == "UpdateHeld"
	})
	kept := 0
	for _, p := range sc.waitReadyPods(3) {
		if before[p.UID] {
			kept++
		}
	}
	if kept != 1 {
		t.Errorf("%d old pods kept, want 1 (partition 1)", kept)
	}
}

// TestResizeInPlace changes a sidecar's CPU and memory (and image): the
// pods keep their UIDs, their spec and the resources the kubelet (the fake
// node) reports are the new ones, and the status counts them updated once
// the resize completes. No pod is recreated, under the default recreate:
// Never.
func TestResizeInPlace(t *testing.T) {
	res := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)},
		}
	}
	sc := newScenario(t, "resize", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Resources = res("100m", "64Mi")
		s.Spec.UpdateStrategy.MaxUnavailable = podCount(2)
	})
	uids := uidsByName(sc.createPods("pod-%d", 2))
	sc.waitStatus(60*time.Second, "2 pods updated and ready", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.UpdatedReadyPods == 2
	})
	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Resources = res("200m", "128Mi")
		s.Spec.Containers[0].Image = "proxy:2"
	})
	sawResizing := false
	s := sc.waitStatus(2*time.Minute, "2 pods resized and updated", func(s *deckhandv1alpha1.SidecarSet) bool {
		if s.Status.ResizingPods > 0 {
			sawResizing = true
		}
		return s.Status.UpdatedReadyPods == 2 && s.Status.ResizingPods == 0 && s.Status.NotUpdatablePods == 0
	})
	if c := condition(s, deckhandv1alpha1.SidecarSetInPlaceUpdatableCondition); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("InPlaceUpdatable = %+v, want True", c)
	}
	t.Logf("resizing reported in status on the way: %v", sawResizing)
	want := res("200m", "128Mi")
	for _, p := range sc.pods() {
		wantNotRecreated(t, &p, uids)
		spec := podutil.FindContainer(p.Spec.Containers, "proxy")
		st := podutil.FindStatus(p.Status.ContainerStatuses, "proxy")
		if spec == nil || st == nil || spec.Image != "proxy:2" || !podutil.SameCPUMemory(&spec.Resources, &want) ||
			st.Resources == nil || !podutil.SameCPUMemory(st.Resources, &want) {
			t.Errorf("pod %s: proxy spec %+v status %+v, want proxy:2 with %v reported", p.Name, spec, st, want)
		}
	}
}

// TestResizeRefusedFallsBackToEvict changes a sidecar's limits so that the
// pods' QoS class would change, which the API server refuses to do in place:
// the refusal is reported (ResizeRefused) and, under recreate: Evict, the
// pods are recreated with the new resources instead.
func TestResizeRefusedFallsBackToEvict(t *testing.T) {
	guaranteed := func(cpu, mem string) corev1.ResourceRequirements {
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
		return corev1.ResourceRequirements{Requests: l, Limits: l.DeepCopy()}
	}
	sc := newScenario(t, "qos", func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Resources = guaranteed("100m", "64Mi")
		s.Spec.UpdateStrategy.Recreate = deckhandv1alpha1.RecreateEvict
	})
	d := testutil.Deployment(sc.ns, sc.app, 2, map[string]string{"app": sc.app}, corev1.Container{Name: "app", Image: "app:1", Resources: guaranteed("100m", "64Mi")})
	testutil.Create(ctxT(t), t, env.Client, d)
	ready := sc.waitReadyPods(2)
	old := uidSet(ready)
	for _, p := range ready {
		if p.Status.QOSClass != corev1.PodQOSGuaranteed {
			t.Fatalf("pod %s is %s, want Guaranteed", p.Name, p.Status.QOSClass)
		}
	}
	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("200m") // Burstable now
	})
	waitEvent(t, sc.name, corev1.EventTypeWarning, "ResizeRefused", "QOS")
	sc.waitStatus(3*time.Minute, "both pods recreated", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.MatchedPods == 2 && s.Status.UpdatedReadyPods == 2 && s.Status.NotUpdatablePods == 0 && s.Status.EvictingPods == 0
	})
	for _, p := range sc.waitReadyPods(2) {
		if old[p.UID] || p.Status.QOSClass != corev1.PodQOSBurstable {
			t.Errorf("pod %s (old: %v) is %s, want a new Burstable pod", p.Name, old[p.UID], p.Status.QOSClass)
		}
	}
}
