package podset_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/test/health"
)

// revisions lists the ControllerRevisions ps controls, oldest first.
func revisions(t *testing.T, ps *deckhandv1alpha1.PodSet) []appsv1.ControllerRevision {
	t.Helper()
	var list appsv1.ControllerRevisionList
	if err := env.Client.List(ctxT(t), &list, client.InNamespace(ps.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []appsv1.ControllerRevision
	for _, cr := range list.Items {
		if ref := metav1.GetControllerOf(&cr); ref != nil && ref.UID == ps.UID {
			out = append(out, cr)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Revision < out[j].Revision })
	return out
}

// describeRevisions renders revisions as "name=number".
func describeRevisions(revs []appsv1.ControllerRevision) string {
	var parts []string
	for _, cr := range revs {
		parts = append(parts, fmt.Sprintf("%s=%d", cr.Name, cr.Revision))
	}
	return strings.Join(parts, " ")
}

// envValue is the value of the V variable of the template's first container.
func envValue(tmpl *corev1.PodTemplateSpec) string {
	for _, e := range tmpl.Spec.Containers[0].Env {
		if e.Name == "V" {
			return e.Value
		}
	}
	return ""
}

func setEnv(t *testing.T, ps *deckhandv1alpha1.PodSet, v string) {
	t.Helper()
	mergePatch(t, ps, `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"`+pauseImage+`","env":[{"name":"V","value":"`+v+`"}]}]}}}}`)
}

// TestRevisionHistoryAndRollback rolls a PodSet through five templates
// with revisionHistoryLimit 2 and checks the ControllerRevisions: one per
// template, controlled by the PodSet, numbered in order, named
// <podset>-<updateRevision>, pruned to the limit beyond the current one.
// Then it rolls back with the annotation kubectl users set: to the
// previous revision, to a revision number, and to one that does not exist.
func TestRevisionHistoryAndRollback(t *testing.T) {
	ps := createPodSet(t, "history", 1, func(ps *deckhandv1alpha1.PodSet) {
		ps.Spec.RevisionHistoryLimit = ptr.To[int32](2)
		ps.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "V", Value: "1"}}
	})
	for v := 2; v <= 5; v++ {
		waitRolledOut(t, ps, 1)
		setEnv(t, ps, fmt.Sprint(v))
	}
	cur := waitRolledOut(t, ps, 1)

	// Pruning runs in the sync after the last rollout's; wait for it.
	var revs []appsv1.ControllerRevision
	eventually(t, time.Minute, "history pruned to the current revision and 2 more", func(context.Context) (bool, string, error) {
		revs = revisions(t, ps)
		return len(revs) == 3, describeRevisions(revs), nil
	})
	for i, cr := range revs {
		if want := int64(3 + i); cr.Revision != want {
			t.Errorf("revisions %s: want numbers 3, 4, 5", describeRevisions(revs))
			break
		}
		if cr.Labels[deckhandv1alpha1.PodSetNameLabel] != ps.Name {
			t.Errorf("ControllerRevision %s has labels %v", cr.Name, cr.Labels)
		}
	}
	newest := revs[2]
	if newest.Name != podset.RevisionName(ps.Name, cur.Status.UpdateRevision) {
		t.Fatalf("newest ControllerRevision %s, want %s (status.updateRevision %s)",
			newest.Name, podset.RevisionName(ps.Name, cur.Status.UpdateRevision), cur.Status.UpdateRevision)
	}
	var data struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(newest.Data.Raw, &data); err != nil || envValue(&data.Spec.Template) != "5" {
		t.Fatalf("newest ControllerRevision holds %s (%v); want the template with V=5", newest.Data.Raw, err)
	}

	// Roll back to the previous revision: V=4, which becomes revision 6.
	mergePatch(t, cur, `{"metadata":{"annotations":{"apps.deckhand.dev/rollback-to":"previous"}}}`)
	waitPodSet(t, ps, time.Minute, "the rollback to the previous revision is applied", func(cur *deckhandv1alpha1.PodSet, _ []corev1.Pod) (bool, string) {
		_, annotated := cur.Annotations[deckhandv1alpha1.PodSetRollbackToAnnotation]
		return !annotated && envValue(&cur.Spec.Template) == "4", fmt.Sprintf("annotated %v, V=%s", annotated, envValue(&cur.Spec.Template))
	})
	waitEvent(t, ps, corev1.EventTypeNormal, podset.ReasonRolledBack, "Rolled back to revision 4")
	cur = waitRolledOut(t, ps, 1)
	eventually(t, time.Minute, "the rolled-back revision is renumbered 6", func(context.Context) (bool, string, error) {
		revs = revisions(t, ps)
		n := len(revs)
		return n > 0 && revs[n-1].Revision == 6 && revs[n-1].Name == podset.RevisionName(ps.Name, cur.Status.UpdateRevision),
			describeRevisions(revs), nil
	})

	// Roll back by number, with the command the docs give.
	mergePatch(t, cur, `{"metadata":{"annotations":{"apps.deckhand.dev/rollback-to":"3"}}}`)
	waitPodSet(t, ps, time.Minute, "the rollback to revision 3 is applied", func(cur *deckhandv1alpha1.PodSet, _ []corev1.Pod) (bool, string) {
		_, annotated := cur.Annotations[deckhandv1alpha1.PodSetRollbackToAnnotation]
		return !annotated && envValue(&cur.Spec.Template) == "3", fmt.Sprintf("annotated %v, V=%s", annotated, envValue(&cur.Spec.Template))
	})
	cur = waitRolledOut(t, ps, 1)
	for _, p := range mustOwned(t, cur) {
		if envValue(&corev1.PodTemplateSpec{Spec: p.Spec}) != "3" {
			t.Fatalf("pod %s runs V=%s after the rollback to V=3", p.Name, envValue(&corev1.PodTemplateSpec{Spec: p.Spec}))
		}
	}

	// A revision that does not exist: the annotation goes, the template stays.
	gen := cur.Generation
	mergePatch(t, cur, `{"metadata":{"annotations":{"apps.deckhand.dev/rollback-to":"99"}}}`)
	waitEvent(t, ps, corev1.EventTypeWarning, podset.ReasonRollbackRevisionNotFound, `"99"`)
	cur = waitPodSet(t, ps, time.Minute, "the annotation is removed", func(cur *deckhandv1alpha1.PodSet, _ []corev1.Pod) (bool, string) {
		_, annotated := cur.Annotations[deckhandv1alpha1.PodSetRollbackToAnnotation]
		return !annotated, fmt.Sprintf("annotations %v", cur.Annotations)
	})
	if cur.Generation != gen || envValue(&cur.Spec.Template) != "3" {
		t.Fatalf("a rollback to a missing revision changed the spec: generation %d -> %d, V=%s", gen, cur.Generation, envValue(&cur.Spec.Template))
	}

	// A ControllerRevision deleted by someone else comes back.
	victim := podset.RevisionName(ps.Name, cur.Status.UpdateRevision)
	if err := env.Client.Delete(ctxT(t), &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: ps.Namespace, Name: victim}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the deleted current revision is recreated", func(ctx context.Context) (bool, string, error) {
		got := &appsv1.ControllerRevision{}
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ps.Namespace, Name: victim}, got)
		return err == nil && got.DeletionTimestamp == nil, fmt.Sprint(err), client.IgnoreNotFound(err)
	})
}

// TestRevisionCollision puts a ControllerRevision the PodSet does not own
// under the name its next template's revision would take. The PodSet counts
// the collision, names its revision with the count folded in, rolls out
// under that revision, and leaves the foreign object alone.
func TestRevisionCollision(t *testing.T) {
	ps := createPodSet(t, "collide", 1)
	cur := waitConverged(t, ps, 1, 2*time.Minute)

	next := cur.Spec.Template.DeepCopy()
	next.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "V", Value: "2"}}
	taken := podset.RevisionName(ps.Name, podset.Revision(next))
	foreign := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: ps.Namespace, Name: taken,
			Labels: map[string]string{deckhandv1alpha1.PodSetNameLabel: ps.Name}},
		Data:     runtime.RawExtension{Raw: []byte(`{"someone":"else"}`)},
		Revision: 1,
	}
	mustCreate(t, foreign)

	setEnv(t, cur, "2")
	if got := podset.Revision(&cur.Spec.Template); got != podset.Revision(next) {
		t.Fatalf("the stored template hashes to %s, the test's to %s: the test no longer predicts the name", got, podset.Revision(next))
	}
	cur = waitRolledOut(t, ps, 1)
	want := podset.RevisionWithCollisions(next, ptr.To[int32](1))
	if ptr.Deref(cur.Status.CollisionCount, 0) != 1 || cur.Status.UpdateRevision != want {
		t.Fatalf("collisionCount %v, updateRevision %s; want 1 and %s", cur.Status.CollisionCount, cur.Status.UpdateRevision, want)
	}
	names := map[string]bool{}
	for _, cr := range revisions(t, cur) {
		names[cr.Name] = true
	}
	if !names[podset.RevisionName(ps.Name, want)] {
		t.Fatalf("no ControllerRevision %s among the PodSet's", podset.RevisionName(ps.Name, want))
	}
	got := &appsv1.ControllerRevision{}
	if err := env.Client.Get(ctxT(t), client.ObjectKeyFromObject(foreign), got); err != nil {
		t.Fatalf("the foreign ControllerRevision: %v", err)
	}
	if got.ResourceVersion != foreign.ResourceVersion || len(got.OwnerReferences) != 0 {
		t.Fatalf("the foreign ControllerRevision was changed: %+v", got.ObjectMeta)
	}
	waitEvent(t, ps, corev1.EventTypeWarning, podset.ReasonRevisionCollision, taken)
}

// TestProgressDeadline sends a PodSet into a rollout that cannot progress
// (its new pods fit no node) and checks that Progressing turns False with
// ProgressDeadlineExceeded once the deadline passes, with no event from
// the pods to wake the controller (it requeues itself at the deadline),
// and that the PodSet reads as Stalled; reverting the template completes.
// A paused PodSet with a pending rollout stays Paused past the deadline.
func TestProgressDeadline(t *testing.T) {
	const deadline = 4
	ps := createPodSet(t, "deadline", 2, func(ps *deckhandv1alpha1.PodSet) {
		ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](deadline)
	})
	health.Wait(t, env.Client, ps, 2*time.Minute, health.IsReady(podset.ReasonComplete))

	mergePatch(t, ps, `{"spec":{"template":{"spec":{"nodeSelector":{"apps.deckhand.dev/no-such-node":"true"}}}}}`)
	health.Wait(t, env.Client, ps, time.Minute, health.IsStalled(podset.ReasonProgressDeadlineExceeded))
	c := meta.FindStatusCondition(ps.Status.Conditions, deckhandv1alpha1.PodSetProgressingCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != podset.ReasonProgressDeadlineExceeded || ps.Status.LastProgressTime == nil {
		t.Fatalf("Progressing %+v, lastProgressTime %v; want False/%s", c, ps.Status.LastProgressTime, podset.ReasonProgressDeadlineExceeded)
	}
	if elapsed := c.LastTransitionTime.Sub(ps.Status.LastProgressTime.Time); elapsed < deadline*time.Second-time.Second {
		t.Fatalf("timed out %v after the last progress, before the %ds deadline", elapsed, deadline)
	}

	mergePatch(t, ps, `{"spec":{"template":{"spec":{"nodeSelector":null}}}}`)
	health.Wait(t, env.Client, ps, 2*time.Minute, health.IsReady(podset.ReasonComplete))
	if ps.Status.LastProgressTime != nil {
		t.Fatalf("lastProgressTime %v once complete, want none", ps.Status.LastProgressTime)
	}

	// Paused with a pending rollout: never ProgressDeadlineExceeded.
	mergePatch(t, ps, `{"spec":{"paused":true,"template":{"spec":{"nodeSelector":{"apps.deckhand.dev/no-such-node":"true"}}}}}`)
	health.Wait(t, env.Client, ps, time.Minute, health.IsPaused(podset.ReasonUpdatePaused))
	pausedAt := time.Now()
	waitFor(t, ps, time.Minute, "the paused PodSet stays Paused for twice its deadline", func(cur *deckhandv1alpha1.PodSet) (bool, string) {
		c := meta.FindStatusCondition(cur.Status.Conditions, deckhandv1alpha1.PodSetProgressingCondition)
		if c == nil || c.Reason != podset.ReasonPaused {
			t.Fatalf("paused PodSet: Progressing %+v, want Unknown/%s throughout", c, podset.ReasonPaused)
		}
		return time.Since(pausedAt) > 2*deadline*time.Second, "paused since " + pausedAt.String()
	})
}

// TestEvictionHonoursPDB rolls 4 pods with podReplacement Evict,
// maxUnavailable 3 and maxSurge 0 under a PodDisruptionBudget of
// minAvailable 3 (its status computed by the local cluster's
// kube-controller-manager, whose disruption controller runs as in any
// cluster), and checks from a watch that never more than one pod was
// unavailable: the PodSet alone would take three at once. The evictions the
// budget refused are reported in an Event.
//
// minAvailable as a number is the budget the disruption controller computes
// from the pods alone; maxUnavailable would make it look up the PodSet's
// scale subresource through its discovery cache, which learns of CRDs
// installed after it started only on its next 30-second refresh.
func TestEvictionHonoursPDB(t *testing.T) {
	const replicas = 4
	ns := env.Namespace(t)
	ps := newPodSet(ns, "evict", replicas, func(ps *deckhandv1alpha1.PodSet) {
		ps.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(3))
		ps.Spec.UpdateStrategy.MaxSurge = ptr.To(intstr.FromInt32(0))
		ps.Spec.UpdateStrategy.PodReplacement = deckhandv1alpha1.EvictPodSetPodReplacement
	})
	mustCreate(t, ps)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evict"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptr.To(intstr.FromInt32(replicas - 1)),
			Selector:     ps.Spec.Selector,
		},
	}
	mustCreate(t, pdb)
	before := waitConverged(t, ps, replicas, 2*time.Minute)
	waitFor(t, pdb, 2*time.Minute, "the disruption controller allows one disruption", func(pdb *policyv1.PodDisruptionBudget) (bool, string) {
		st := pdb.Status
		return st.ObservedGeneration == pdb.Generation && st.CurrentHealthy == replicas && st.DisruptionsAllowed == 1,
			fmt.Sprintf("%+v", st)
	})

	bw := watchBudgets(t, ns)
	setEnv(t, before, "2")
	waitRolledOut(t, ps, replicas)
	bw.stop()
	checkRollout(t, "evict", bw, replicas, 1, 0)
	waitEvent(t, ps, corev1.EventTypeNormal, podset.ReasonEvictionBlocked, "disruption budget")
	waitPodSet(t, ps, time.Minute, "no pod waits on the budget once done", func(cur *deckhandv1alpha1.PodSet, _ []corev1.Pod) (bool, string) {
		return len(cur.Status.DisruptionBlockedPods) == 0, fmt.Sprint(cur.Status.DisruptionBlockedPods)
	})
}
