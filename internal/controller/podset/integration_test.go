package podset_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// TestScaleUpAndDown scales 0 -> 50 -> 5 -> 0 and checks every status field
// at each step, including podNames against the pods that really exist.
func TestScaleUpAndDown(t *testing.T) {
	ps := createPodSet(t, "web", 0)
	for _, n := range []int32{0, 50, 5, 0} {
		setReplicas(t, ps, n)
		cur := waitConverged(t, ps, n, 2*time.Minute)
		pods, err := ownedPods(ctxT(t), cur)
		if err != nil {
			t.Fatal(err)
		}
		st := cur.Status
		want := activeNames(pods)
		if !slices.Equal(st.PodNames, want) || !sort.StringsAreSorted(st.PodNames) {
			t.Fatalf("replicas %d: status.podNames = %v, want the sorted names of the owned pods %v", n, st.PodNames, want)
		}
		if st.FullyLabeledReplicas != n {
			t.Errorf("replicas %d: fullyLabeledReplicas = %d", n, st.FullyLabeledReplicas)
		}
		if st.Selector != "app=web" {
			t.Errorf("status.selector = %q, want app=web", st.Selector)
		}
		if st.UpdateRevision == "" || st.CurrentRevision != st.UpdateRevision {
			t.Errorf("revisions: current %q update %q", st.CurrentRevision, st.UpdateRevision)
		}
		if c := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.PodSetAvailableCondition); c == nil || c.Status != metav1.ConditionTrue {
			t.Errorf("replicas %d: Available condition = %+v", n, c)
		}
		if c := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.PodSetReplicaFailureCondition); c != nil {
			t.Errorf("replicas %d: unexpected ReplicaFailure %+v", n, c)
		}
		for _, p := range pods {
			if !strings.HasPrefix(p.Name, "web-") || p.Labels[deckhandv1alpha1.PodSetRevisionLabel] != st.UpdateRevision {
				t.Fatalf("pod %s: want name web-<suffix> and revision label %s, labels %v", p.Name, st.UpdateRevision, p.Labels)
			}
			ref := metav1.GetControllerOf(&p)
			if ref == nil || !ptr.Deref(ref.BlockOwnerDeletion, false) || ref.Kind != "PodSet" {
				t.Fatalf("pod %s: controller reference %+v", p.Name, ref)
			}
		}
	}
	// Events on the PodSet: creates and deletes.
	eventually(t, 30*time.Second, "SuccessfulCreate and SuccessfulDelete events", func(ctx context.Context) (bool, string, error) {
		var evs eventsv1.EventList
		if err := env.Client.List(ctx, &evs, client.InNamespace(ps.Namespace)); err != nil {
			return false, "", err
		}
		reasons := map[string]bool{}
		for _, e := range evs.Items {
			if e.Regarding.Kind == "PodSet" && e.Regarding.Name == "web" {
				reasons[e.Reason] = true
			}
		}
		return reasons["SuccessfulCreate"] && reasons["SuccessfulDelete"], fmt.Sprint(reasons), nil
	})
}

// TestLargestStatusIsStored writes the largest status the controller can
// write, PodSetStatusMaxPodNames names of the longest a generated pod name
// can be, to the real API server: it is stored, and the API server keeps
// one managedFields entry for the list, not one per name (an atomic list).
// One name more is refused, naming the field.
func TestLargestStatusIsStored(t *testing.T) {
	ctx := ctxT(t)
	ps := createPodSet(t, "big", 0)
	// A generated pod name is at most 63 characters: the PodSet's name
	// cut to 58, then 5 random ones.
	podNames := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%09d", strings.Repeat("p", 53), i)
		}
		return out
	}
	write := func(n int) error {
		cur := ps.DeepCopy()
		orig := cur.DeepCopy()
		cur.Status.PodNames = podNames(n)
		// Another field manager than the controller's, whose writes the
		// controller's next status write replaces.
		err := env.Client.Status().Patch(ctx, cur, client.MergeFrom(orig), client.FieldOwner("largest-status-test"))
		if err == nil {
			ps = cur
		}
		return err
	}
	const limit = deckhandv1alpha1.PodSetStatusMaxPodNames
	if err := write(limit); err != nil {
		t.Fatalf("a status listing %d pod names of 63 characters: %v", limit, err)
	}
	if len(ps.Status.PodNames) != limit {
		t.Fatalf("stored %d pod names, want %d", len(ps.Status.PodNames), limit)
	}
	tracked := 0
	for _, mf := range ps.ManagedFields {
		if mf.Manager == "largest-status-test" && mf.FieldsV1 != nil {
			tracked += len(mf.FieldsV1.GetRawBytes())
		}
	}
	if tracked == 0 || tracked > 1024 {
		t.Errorf("managedFields of the status write: %d bytes, want one entry for the whole list (under 1 KiB)", tracked)
	}
	err := write(limit + 1)
	if err == nil || !strings.Contains(err.Error(), "status.podNames") {
		t.Fatalf("a status listing %d pod names: %v, want a refusal naming status.podNames", limit+1, err)
	}
}

// TestDeletionOrder adopts five hand-made pods and scales down one at a
// time: the unscheduled pod goes first, then the not-ready one, then by
// pod-deletion-cost.
func TestDeletionOrder(t *testing.T) {
	ns := env.Namespace(t)
	mk := func(name string, mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "order", "tier": "test"}},
			Spec: corev1.PodSpec{
				Containers:                    []corev1.Container{{Name: "main", Image: pauseImage}},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
			},
		}
		if mut != nil {
			mut(p)
		}
		mustCreate(t, p)
		return p
	}
	mk("gated", func(p *corev1.Pod) {
		// A scheduling gate keeps it unscheduled.
		p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/hold"}}
	})
	mk("notready", nil)
	mk("cheap", func(p *corev1.Pod) {
		p.Annotations = map[string]string{deckhandv1alpha1.PodDeletionCostAnnotation: "-100"}
	})
	mk("plain", nil)
	mk("precious", func(p *corev1.Pod) {
		p.Annotations = map[string]string{deckhandv1alpha1.PodDeletionCostAnnotation: "100"}
	})
	// kwok makes the scheduled pods Ready; then the test, acting as the
	// kubelet, marks "notready" not Ready (kwok only touches Pending pods).
	eventually(t, time.Minute, "four scheduled pods Ready", func(ctx context.Context) (bool, string, error) {
		n := 0
		for _, name := range []string{"notready", "cheap", "plain", "precious"} {
			var p corev1.Pod
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
				return false, "", err
			}
			if podutil.IsPodReady(&p) {
				n++
			}
		}
		return n == 4, fmt.Sprintf("%d ready", n), nil
	})
	var nr corev1.Pod
	if err := env.Client.Get(ctxT(t), client.ObjectKey{Namespace: ns, Name: "notready"}, &nr); err != nil {
		t.Fatal(err)
	}
	for i := range nr.Status.Conditions {
		if nr.Status.Conditions[i].Type == corev1.PodReady {
			nr.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	if err := env.Client.Status().Update(ctxT(t), &nr); err != nil {
		t.Fatal(err)
	}

	ps := newPodSet(ns, "order", 5, onDelete)
	mustCreate(t, ps)
	eventually(t, time.Minute, "all five pods adopted", func(ctx context.Context) (bool, string, error) {
		pods, err := ownedPods(ctx, ps)
		return len(pods) == 5, fmt.Sprint(activeNames(pods)), err
	})
	remaining := []string{"cheap", "gated", "notready", "plain", "precious"}
	for i, victim := range []string{"gated", "notready", "cheap", "plain"} {
		n := int32(4 - i)
		setReplicas(t, ps, n)
		remaining = slices.DeleteFunc(remaining, func(s string) bool { return s == victim })
		eventually(t, time.Minute, fmt.Sprintf("scale to %d deletes %s", n, victim), func(ctx context.Context) (bool, string, error) {
			pods, err := ownedPods(ctx, ps)
			if err != nil {
				return false, "", err
			}
			got := activeNames(pods)
			return slices.Equal(got, remaining), fmt.Sprintf("active %v, want %v", got, remaining), nil
		})
	}
}

// TestAdoptionAndRelease: matching orphans are adopted (and only they),
// a pod relabelled out of the selector is released and replaced.
func TestAdoptionAndRelease(t *testing.T) {
	ns := env.Namespace(t)
	orphan := func(name, app string) {
		mustCreate(t, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": app}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: pauseImage}}, TerminationGracePeriodSeconds: ptr.To[int64](0)},
		})
	}
	orphan("orphan-1", "adopt")
	orphan("orphan-2", "adopt")
	orphan("stranger", "other")

	ps := newPodSet(ns, "adopt", 3, onDelete)
	mustCreate(t, ps)
	// The adopted pods have no revision label: they count as old, and
	// OnDelete leaves them running, so only one pod is "updated".
	var pods []corev1.Pod
	cur := waitPodSet(t, ps, 2*time.Minute, "two orphans adopted and one pod created", func(cur *deckhandv1alpha1.PodSet, owned []corev1.Pod) (bool, string) {
		pods = owned
		st := cur.Status
		return len(pods) == 3 && st.Replicas == 3 && st.ReadyReplicas == 3 && st.UpdatedReplicas == 1,
			fmt.Sprintf("owned %v, status %+v", activeNames(pods), st)
	})
	names := activeNames(pods)
	if !slices.Contains(names, "orphan-1") || !slices.Contains(names, "orphan-2") || slices.Contains(names, "stranger") {
		t.Fatalf("owned pods %v: want both orphans adopted and the stranger left alone", names)
	}
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.UID != cur.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Fatalf("pod %s: owner reference %+v", p.Name, ref)
		}
	}

	// Release: orphan-1 stops matching.
	mergePatch(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan-1"}}, `{"metadata":{"labels":{"app":"gone"}}}`)
	eventually(t, time.Minute, "orphan-1 released and replaced", func(ctx context.Context) (bool, string, error) {
		var p corev1.Pod
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orphan-1"}, &p); err != nil {
			return false, "", err
		}
		pods, err := ownedPods(ctx, cur)
		if err != nil {
			return false, "", err
		}
		ref := metav1.GetControllerOf(&p)
		names := activeNames(pods)
		return ref == nil && len(names) == 3 && !slices.Contains(names, "orphan-1"),
			fmt.Sprintf("orphan-1 controller %v, owned %v", ref, names), nil
	})
}

// TestGarbageCollection: deleting the PodSet removes its pods through the
// garbage collector (no finalizer involved).
func TestGarbageCollection(t *testing.T) {
	ps := createPodSet(t, "gc", 3)
	cur := waitConverged(t, ps, 3, 2*time.Minute)
	if len(cur.Finalizers) != 0 {
		t.Fatalf("PodSet has finalizers %v, want none", cur.Finalizers)
	}
	if err := env.Client.Delete(ctxT(t), cur); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the garbage collector removes the pods", func(ctx context.Context) (bool, string, error) {
		var list corev1.PodList
		if err := env.Client.List(ctx, &list, client.InNamespace(ps.Namespace)); err != nil {
			return false, "", err
		}
		return len(list.Items) == 0, fmt.Sprintf("%d pods left", len(list.Items)), nil
	})
}

// TestScaleSubresource drives replicas through /scale, as kubectl scale and
// the HorizontalPodAutoscaler do.
func TestScaleSubresource(t *testing.T) {
	ps := createPodSet(t, "scaled", 2)
	waitConverged(t, ps, 2, time.Minute)

	scale := &autoscalingv1.Scale{}
	if err := env.Client.SubResource("scale").Get(ctxT(t), ps, scale); err != nil {
		t.Fatalf("GET /scale: %v", err)
	}
	if scale.Spec.Replicas != 2 || scale.Status.Replicas != 2 || scale.Status.Selector != "app=scaled" {
		t.Fatalf("scale = %+v, want spec 2, status 2, selector app=scaled", scale)
	}
	scale.Spec.Replicas = 4
	if err := env.Client.SubResource("scale").Update(ctxT(t), ps, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("PUT /scale: %v", err)
	}
	cur := waitConverged(t, ps, 4, time.Minute)
	if *cur.Spec.Replicas != 4 {
		t.Fatalf("spec.replicas = %d after /scale", *cur.Spec.Replicas)
	}
}
