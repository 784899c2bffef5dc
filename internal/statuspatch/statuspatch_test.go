package statuspatch_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/statuspatch"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

const (
	policyManager = "deckhand-sidecarpolicy"
	policyType    = deckhandv1alpha1.SidecarSetInjectionPolicyReadyCondition
)

// writers returns the two writers of a SidecarSet's status, as the manager
// runs them: under the manager's own identity, so that a permission the
// mechanics need and the roles lack fails the test.
// Their writes of status are counted in *writes.
func writers(t *testing.T, writes *atomic.Int32) (sidecarset, policy statuspatch.Writer) {
	t.Helper()
	c, err := client.NewWithWatch(env.ManagerConfig, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	counted := interceptor.NewClient(c, interceptor.Funcs{
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			writes.Add(1)
			return c.SubResource(sub).Apply(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			writes.Add(1)
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	})
	return statuspatch.Writer{Client: counted, FieldManager: deckhandv1alpha1.FieldManager}, statuspatch.Writer{Client: counted, FieldManager: policyManager}
}

func newSidecarSet(ctx context.Context, t *testing.T) *deckhandv1alpha1.SidecarSet {
	t.Helper()
	ns := env.Namespace(t)
	s := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Namespace:  ns,
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Containers: []deckhandv1alpha1.SidecarContainer{{Container: corev1.Container{Name: "proxy", Image: "registry.example/proxy:1"}}},
		},
	}
	testutil.Create(ctx, t, env.Client, s)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), s) })
	return s
}

func read(ctx context.Context, t *testing.T, name string) *deckhandv1alpha1.SidecarSet {
	t.Helper()
	s := &deckhandv1alpha1.SidecarSet{}
	if err := env.Client.Get(ctx, types.NamespacedName{Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func cond(typ string, status metav1.ConditionStatus, reason string, gen int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: reason, ObservedGeneration: gen,
		LastTransitionTime: metav1.NewTime(time.Now())}
}

// initialStatus writes the status a SidecarSet has before anything else
// writes to it: the policy controller's condition alone would lack the
// counts the schema requires.
func initialStatus(ctx context.Context, t *testing.T, w statuspatch.Writer, name string) {
	t.Helper()
	mustWrite(t, "the first status", func() error {
		_, err := w.Status(ctx, read(ctx, t, name), &deckhandv1alpha1.SidecarSetStatus{MatchedPods: 1})
		return err
	})
}

func mustWrite(t *testing.T, what string, write func() error) {
	t.Helper()
	if err := write(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// TestWritersKeepTheirOwnConditions: the SidecarSet controller writes its
// whole status, computed without the policy controller's condition, and
// the policy controller sets and then removes its one condition; each
// write leaves the other writer's conditions as they were. A write that
// changes nothing is not sent.
func TestWritersKeepTheirOwnConditions(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	var writes atomic.Int32
	main, policy := writers(t, &writes)
	s := newSidecarSet(ctx, t)
	initialStatus(ctx, t, main, s.Name)

	inPlace := cond(policyType, metav1.ConditionTrue, "PolicyInPlace", s.Generation)
	mustWrite(t, "the policy condition", func() error {
		res, err := policy.Conditions(ctx, read(ctx, t, s.Name), []string{policyType}, inPlace)
		if res.RequeueAfter != 0 {
			t.Fatalf("a write from a fresh copy asked to retry")
		}
		return err
	})

	st := deckhandv1alpha1.SidecarSetStatus{ObservedGeneration: s.Generation, MatchedPods: 3, ReadyPods: 3, LatestRevision: "abc",
		Conditions: []metav1.Condition{cond(deckhandv1alpha1.ReadyCondition, metav1.ConditionTrue, "AllPodsUpdated", s.Generation)}}
	mustWrite(t, "the SidecarSet controller's status", func() error {
		_, err := main.Status(ctx, read(ctx, t, s.Name), &st, policyType)
		return err
	})
	got := read(ctx, t, s.Name)
	if c := meta.FindStatusCondition(got.Status.Conditions, policyType); c == nil || c.Status != metav1.ConditionTrue || c.Reason != inPlace.Reason {
		t.Fatalf("the SidecarSet controller's write dropped or changed %s: %+v", policyType, got.Status.Conditions)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.ReadyCondition); c == nil || got.Status.MatchedPods != 3 {
		t.Fatalf("the SidecarSet controller's status was not written: %+v", got.Status)
	}

	// The same status again, from the copy that now holds both writers'
	// conditions: nothing to send.
	before := writes.Load()
	mustWrite(t, "the same status again", func() error {
		_, err := main.Status(ctx, got, &st, policyType)
		return err
	})
	mustWrite(t, "the same policy condition again", func() error {
		_, err := policy.Conditions(ctx, got, []string{policyType}, *meta.FindStatusCondition(got.Status.Conditions, policyType))
		return err
	})
	if n := writes.Load() - before; n != 0 {
		t.Fatalf("writes that changed nothing were sent: %d", n)
	}

	mustWrite(t, "removing the policy condition", func() error {
		_, err := policy.Conditions(ctx, read(ctx, t, s.Name), []string{policyType})
		return err
	})
	got = read(ctx, t, s.Name)
	if meta.FindStatusCondition(got.Status.Conditions, policyType) != nil {
		t.Fatalf("%s not removed: %+v", policyType, got.Status.Conditions)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.ReadyCondition); c == nil || got.Status.MatchedPods != 3 {
		t.Fatalf("removing the policy condition changed the SidecarSet controller's status: %+v", got.Status)
	}
}

// TestStaleCopyIsRetried: a write computed from a copy older than the
// stored object is refused by the API server and asks for a retry, without
// an error; the stored status keeps the newer write.
func TestStaleCopyIsRetried(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	main, policy := writers(t, &atomic.Int32{})
	s := newSidecarSet(ctx, t)
	initialStatus(ctx, t, main, s.Name)
	stale := read(ctx, t, s.Name)

	mustWrite(t, "the policy condition", func() error {
		_, err := policy.Conditions(ctx, read(ctx, t, s.Name), []string{policyType}, cond(policyType, metav1.ConditionTrue, "PolicyInPlace", s.Generation))
		return err
	})
	st := deckhandv1alpha1.SidecarSetStatus{MatchedPods: 7}
	res, err := main.Status(ctx, stale, &st, policyType)
	if err != nil || res.RequeueAfter != statuspatch.RetryAfterConflict {
		t.Fatalf("a write from a stale copy: %+v, %v; want a retry after %s and no error", res, err, statuspatch.RetryAfterConflict)
	}
	got := read(ctx, t, s.Name)
	if got.Status.MatchedPods == 7 || meta.FindStatusCondition(got.Status.Conditions, policyType) == nil {
		t.Fatalf("the stale write landed: %+v", got.Status)
	}
	// Read again, as the retried reconcile does: it lands.
	if res, err := main.Status(ctx, got, &st, policyType); err != nil || res.RequeueAfter != 0 {
		t.Fatalf("the retry: %+v, %v", res, err)
	}
	if got = read(ctx, t, s.Name); got.Status.MatchedPods != 7 || meta.FindStatusCondition(got.Status.Conditions, policyType) == nil {
		t.Fatalf("after the retry: %+v", got.Status)
	}
}

// TestUpdateWritesAreTakenOver: an object whose status an older Deckhand
// wrote with merge patches (whole conditions lists, under both field
// managers) gets rid of a condition and a field each writer no longer
// sets: the API server alone would keep them, owned by those patches.
func TestUpdateWritesAreTakenOver(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	main, policy := writers(t, &atomic.Int32{})
	s := newSidecarSet(ctx, t)
	old := []metav1.Condition{
		cond(deckhandv1alpha1.ReadyCondition, metav1.ConditionFalse, "RolloutInProgress", s.Generation),
		cond(deckhandv1alpha1.ReconcilingCondition, metav1.ConditionTrue, "RolloutInProgress", s.Generation),
		cond(policyType, metav1.ConditionTrue, "PolicyInPlace", s.Generation),
	}
	for _, manager := range []string{deckhandv1alpha1.FieldManager, policyManager} {
		data, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": old, "latestRevision": "old", "unmanagedPods": 2,
			"matchedPods": 0, "readyPods": 0, "updatedPods": 0, "updatedReadyPods": 0}})
		if err != nil {
			t.Fatal(err)
		}
		mustWrite(t, "the older write", func() error {
			return env.Client.Status().Patch(ctx, read(ctx, t, s.Name), client.RawPatch(types.MergePatchType, data), client.FieldOwner(manager))
		})
	}

	st := deckhandv1alpha1.SidecarSetStatus{ObservedGeneration: s.Generation, MatchedPods: 1,
		Conditions: []metav1.Condition{cond(deckhandv1alpha1.ReadyCondition, metav1.ConditionTrue, "AllPodsUpdated", s.Generation)}}
	mustWrite(t, "the SidecarSet controller's status", func() error {
		_, err := main.Status(ctx, read(ctx, t, s.Name), &st, policyType)
		return err
	})
	got := read(ctx, t, s.Name)
	if meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.ReconcilingCondition) != nil || got.Status.LatestRevision != "" || got.Status.UnmanagedPods != 0 {
		t.Fatalf("what the SidecarSet controller no longer sets is still there: %+v", got.Status)
	}
	if meta.FindStatusCondition(got.Status.Conditions, policyType) == nil {
		t.Fatalf("the SidecarSet controller removed %s: %+v", policyType, got.Status.Conditions)
	}
	mustWrite(t, "removing the policy condition", func() error {
		_, err := policy.Conditions(ctx, got, []string{policyType})
		return err
	})
	got = read(ctx, t, s.Name)
	if meta.FindStatusCondition(got.Status.Conditions, policyType) != nil || meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.ReadyCondition) == nil {
		t.Fatalf("after the policy controller removed its condition: %+v", got.Status.Conditions)
	}
}

// TestChangeBetweenApplyAndCleanupIsRetried: when the object changes
// between the apply and the removal of what older writes left, the removal
// is refused and the write asks for a retry, without an error; the retry
// from a fresh copy finishes it.
func TestChangeBetweenApplyAndCleanupIsRetried(t *testing.T) {
	ctx := testutil.Context(t, time.Minute)
	s := newSidecarSet(ctx, t)
	old := []metav1.Condition{cond(deckhandv1alpha1.StalledCondition, metav1.ConditionTrue, "PodsNotInjected", s.Generation)}
	data, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": old,
		"matchedPods": 0, "readyPods": 0, "updatedPods": 0, "updatedReadyPods": 0}})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, "the older write", func() error {
		return env.Client.Status().Patch(ctx, read(ctx, t, s.Name), client.RawPatch(types.MergePatchType, data), client.FieldOwner(deckhandv1alpha1.FieldManager))
	})

	c, err := client.NewWithWatch(env.ManagerConfig, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// Another writer's condition lands right after the first apply.
	var applies atomic.Int32
	between := interceptor.NewClient(c, interceptor.Funcs{
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			if err := c.SubResource(sub).Apply(ctx, obj, opts...); err != nil {
				return err
			}
			if applies.Add(1) > 1 {
				return nil
			}
			other := read(ctx, t, s.Name)
			_, err := statuspatch.Writer{Client: c, FieldManager: policyManager}.Conditions(ctx, other, []string{policyType},
				cond(policyType, metav1.ConditionFalse, "PolicyNotYetInEffect", other.Generation))
			return err
		},
	})
	main := statuspatch.Writer{Client: between, FieldManager: deckhandv1alpha1.FieldManager}
	st := deckhandv1alpha1.SidecarSetStatus{MatchedPods: 2}
	res, err := main.Status(ctx, read(ctx, t, s.Name), &st, policyType)
	if err != nil || res.RequeueAfter != statuspatch.RetryAfterConflict {
		t.Fatalf("a cleanup after which the object changed: %+v, %v; want a retry after %s and no error", res, err, statuspatch.RetryAfterConflict)
	}
	mustWrite(t, "the retry", func() error {
		res, err := main.Status(ctx, read(ctx, t, s.Name), &st, policyType)
		if err == nil && res.RequeueAfter != 0 {
			t.Fatalf("the retry asked to retry again")
		}
		return err
	})
	if got := read(ctx, t, s.Name); meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.StalledCondition) != nil || got.Status.MatchedPods != 2 {
		t.Fatalf("after the retry: %+v", got.Status)
	}
}
