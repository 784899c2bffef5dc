package sidecarset_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

func podCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == deckhandv1alpha1.SidecarSetsUpdatablePodCondition {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// podsWithCondition counts the pods of ns whose pod condition has status
// and a message containing msg, and returns the resourceVersions of all the
// namespace's pods by name.
func podsWithCondition(ctx context.Context, ns string, status corev1.ConditionStatus, msg string) (int, map[string]string, error) {
	pods, err := listPods(ctx, ns)
	if err != nil {
		return 0, nil, err
	}
	k, rv := 0, map[string]string{}
	for _, p := range pods {
		rv[p.Name] = p.ResourceVersion
		if c := podCondition(&p); c != nil && c.Status == status && strings.Contains(c.Message, msg) {
			k++
		}
	}
	return k, rv, nil
}

// TestPodConditionFollowsNotUpdatablePods: a change that cannot reach
// running pods in place (an env change, recreate Never) sets the pod
// condition apps.deckhand.dev/SidecarSetsUpdatable False on each pod
// status.notUpdatablePods counts, naming the SidecarSet; a reconcile that
// changes nothing writes no pod; reverting the change sets it True again.
func TestPodConditionFollowsNotUpdatablePods(t *testing.T) {
	sc := newScenario(t, "podcond")
	const n = 3
	sc.createPods("pod-%d", n)
	sc.waitUpdatedReady(90*time.Second, n)
	for _, p := range sc.pods() {
		if c := podCondition(&p); c != nil {
			t.Fatalf("pod %s carries %s before anything blocked it: %+v", p.Name, c.Type, c)
		}
	}

	// count returns the pods whose condition has status, and their
	// resourceVersions.
	count := func(ctx context.Context, status corev1.ConditionStatus, msg string) (int, map[string]string) {
		k, rv, err := podsWithCondition(ctx, sc.ns, status, msg)
		if err != nil {
			t.Fatal(err)
		}
		return k, rv
	}

	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "strict"}}
	})
	sc.waitStatus(60*time.Second, "every pod counted not updatable", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.NotUpdatablePods == n
	})
	var rvs map[string]string
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		k, rv := count(ctx, corev1.ConditionFalse, "SidecarSet "+sc.name+": revision ")
		rvs = rv
		return k == n, nil
	}, "all %d pods carry %s False naming SidecarSet %s", n, deckhandv1alpha1.SidecarSetsUpdatablePodCondition, sc.name)
	p, err := sc.getPod(ctxT(t), "pod-0")
	if err != nil {
		t.Fatal(err)
	}
	c := podCondition(p)
	if c.Reason != "NotUpdatableInPlace" || !strings.Contains(c.Message, "more than images") {
		t.Errorf("condition %+v: want reason NotUpdatableInPlace and a message saying why", c)
	}

	// Further reconciles (a new generation that changes nothing for the
	// pods, and the pod events it causes) leave the pods alone: the
	// condition is written when it changes, not per reconcile. The write
	// counter sees writes that change nothing too, which the pods'
	// resourceVersions would not show.
	writes := podConditionWrites(t, sc.name)
	reconciles := sidecarSetReconciles(t)
	s := sc.update(func(s *deckhandv1alpha1.SidecarSet) { s.Spec.UpdateStrategy.Paused = true })
	sc.waitStatus(60*time.Second, "the new generation observed", func(got *deckhandv1alpha1.SidecarSet) bool {
		return got.Status.ObservedGeneration >= s.Generation && got.Status.NotUpdatablePods == n
	})
	// Else the check below would prove nothing.
	waitReconcileCounted(t, reconciles)
	if _, after := count(ctxT(t), corev1.ConditionFalse, ""); !maps.Equal(after, rvs) {
		t.Errorf("a reconcile that changed nothing wrote pods: resourceVersions %v, then %v", rvs, after)
	}
	if got := podConditionWrites(t, sc.name); got != writes {
		t.Errorf("a reconcile that changed nothing wrote the pod condition %.0f time(s)", got-writes)
	}

	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = nil
		s.Spec.UpdateStrategy.Paused = false
	})
	sc.waitStatus(60*time.Second, "no pod counted not updatable", func(s *deckhandv1alpha1.SidecarSet) bool {
		return s.Status.NotUpdatablePods == 0
	})
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		k, _ := count(ctx, corev1.ConditionTrue, "")
		return k == n, nil
	}, "all %d pods carry %s True again", n, deckhandv1alpha1.SidecarSetsUpdatablePodCondition)
}

// podConditionWrites reads deckhand_sidecarset_pod_condition_writes_total
// for SidecarSet name (all results) from the in-process manager's registry.
func podConditionWrites(t *testing.T, name string) float64 {
	t.Helper()
	return counterTotal(t, func(metric string) bool { return strings.HasSuffix(metric, "pod_condition_writes_total") }, "sidecarset", name)
}

// TestPodConditionDropsDeletedSidecarSet: deleting a SidecarSet that named
// pods not updatable in place takes its entry out of their pod condition
// (True again when no other SidecarSet names them): nothing else would ever
// clear it, since the pods keep recording the SidecarSet that injected them.
func TestPodConditionDropsDeletedSidecarSet(t *testing.T) {
	sc := newScenario(t, "podconddel")
	const n = 2
	sc.createPods("pod-%d", n)
	sc.waitUpdatedReady(90*time.Second, n)
	sc.update(func(s *deckhandv1alpha1.SidecarSet) {
		s.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "strict"}}
	})
	carrying := func(status corev1.ConditionStatus, msg string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			k, _, err := podsWithCondition(ctx, sc.ns, status, msg)
			return k == n, err
		}
	}
	testutil.Eventually(t, 60*time.Second, carrying(corev1.ConditionFalse, "SidecarSet "+sc.name+": "),
		"all %d pods carry %s False naming SidecarSet %s", n, deckhandv1alpha1.SidecarSetsUpdatablePodCondition, sc.name)

	if err := env.Client.Delete(ctxT(t), sc.set); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 60*time.Second, carrying(corev1.ConditionTrue, "every SidecarSet of the pod can update"),
		"all %d pods carry %s True once SidecarSet %s is gone", n, deckhandv1alpha1.SidecarSetsUpdatablePodCondition, sc.name)
}

// TestDeletedSidecarSetOpensTheGatesItLeft: a pod injected by a SidecarSet
// that is deleted before the pod's containers are ready still has its
// in-place update gate opened, and so turns Ready; no other SidecarSet would
// open it.
func TestDeletedSidecarSetOpensTheGatesItLeft(t *testing.T) {
	sc := newScenario(t, "gatedel")
	p := sc.pod("slow-0")
	// The fake node holds the app not ready this long: the SidecarSet is
	// gone well before the pod's containers are ready.
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{InitialDelaySeconds: 8,
		ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	p = sc.create(p)
	if !inplacegate.Gated(p) {
		t.Fatalf("the injected pod lists no %s readiness gate: %v", inplacegate.ConditionType, p.Spec.ReadinessGates)
	}
	if err := env.Client.Delete(ctxT(t), sc.set); err != nil {
		t.Fatal(err)
	}
	if got, err := sc.getPod(ctxT(t), p.Name); err != nil || inplacegate.ContainersReady(got) {
		t.Fatalf("the pod's containers are ready (%v) before the SidecarSet's deletion was sent: the test shows nothing", err)
	}
	testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		got, err := sc.getPod(ctx, p.Name)
		if err != nil {
			return false, err
		}
		ready := false
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodReady {
				ready = c.Status == corev1.ConditionTrue
			}
		}
		return inplacegate.Open(got) && ready, nil
	}, "pod %s has its gate opened and turns Ready after SidecarSet %s is deleted", p.Name, sc.name)
}
