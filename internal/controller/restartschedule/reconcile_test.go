package restartschedule

// Unit tests of the RestartSchedule reconciler: a fake client and an
// injected clock, so that schedules an hour apart are tested in
// milliseconds and never by sleeping. The integration tests (on the
// control plane suite_test.go starts) prove the same behaviours against a
// real cluster.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

const unitNS = "unit"

func unitScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(deckhandv1alpha1.AddToScheme(s))
	return s
}

type harness struct {
	t      *testing.T
	c      client.Client
	clock  *clocktesting.FakeClock
	events *events.FakeRecorder
	r      *Reconciler
	// evicted are the pods evicted, in order.
	evicted []string
}

func newHarness(t *testing.T, now string, objs ...client.Object) *harness {
	t.Helper()
	h := &harness{t: t, clock: clocktesting.NewFakeClock(testutil.Time(t, now)), events: events.NewFakeRecorder(100)}
	h.c = fake.NewClientBuilder().WithScheme(unitScheme()).
		WithStatusSubresource(&deckhandv1alpha1.RestartSchedule{}, &appsv1.Deployment{}).
		WithIndex(&deckhandv1alpha1.RestartSchedule{}, activeWorkloadIndex, activeWorkloads).
		WithObjects(objs...).
		// Play the API server's part the fake client leaves out: a change
		// of a Deployment's spec bumps its generation.
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if err := c.Patch(ctx, obj, patch, opts...); err != nil {
				return err
			}
			if d, ok := obj.(*appsv1.Deployment); ok {
				d.Generation++
				return c.Update(ctx, d)
			}
			return nil
		},
			// An eviction is accepted and recorded, and the pod left as it
			// was: what a cache that has not seen the eviction yet shows,
			// until the test deletes the pod.
			SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
				if sub != "eviction" {
					return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
				}
				h.evicted = append(h.evicted, obj.GetName())
				return nil
			}}).Build()
	h.r = &Reconciler{Client: h.c, Clock: h.clock, Recorder: h.events}
	return h
}

func schedule(name, spec, created string, mutate ...func(*deckhandv1alpha1.RestartSchedule)) *deckhandv1alpha1.RestartSchedule {
	ct, _ := time.Parse(time.RFC3339, created)
	rs := &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: unitNS, Generation: 1, CreationTimestamp: metav1.NewTime(ct)},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Schedule: spec, TimeZone: "UTC",
			Target:            deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: "web"}},
			ConcurrencyPolicy: deckhandv1alpha1.RestartForbid, MaxConcurrent: 1, HistoryLimit: 10,
			RolloutTimeout: &metav1.Duration{Duration: 10 * time.Minute},
		},
	}
	for _, m := range mutate {
		m(rs)
	}
	return rs
}

func deployment(name string, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: unitNS, Labels: labels, Generation: 1},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"keep": "me"}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2, ReadyReplicas: 2},
	}
}

// reconcile reconciles name as the workqueue would: again at once when a
// reconcile restarted workloads and left their record to the next one.
func (h *harness) reconcile(name string) ctrl.Result {
	h.t.Helper()
	for range 3 {
		res := h.reconcileOnce(name)
		if res.RequeueAfter != statusAfterPatchDelay {
			return res
		}
	}
	h.t.Fatalf("reconcile: still deferring the status after 3 reconciles")
	return ctrl.Result{}
}

func (h *harness) reconcileOnce(name string) ctrl.Result {
	h.t.Helper()
	res, err := h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: unitNS, Name: name}})
	if err != nil {
		h.t.Fatalf("reconcile: %v", err)
	}
	return res
}

// get reads name of the test namespace into obj and returns it.
func get[T client.Object](h *harness, name string, obj T) T {
	h.t.Helper()
	if err := h.c.Get(context.Background(), types.NamespacedName{Namespace: unitNS, Name: name}, obj); err != nil {
		h.t.Fatal(err)
	}
	return obj
}

func (h *harness) rs(name string) *deckhandv1alpha1.RestartSchedule {
	return get(h, name, &deckhandv1alpha1.RestartSchedule{})
}

func (h *harness) deploy(name string) *appsv1.Deployment {
	return get(h, name, &appsv1.Deployment{})
}

func (h *harness) restartedAt(name string) string {
	return h.deploy(name).Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]
}

// rolledOut plays the Deployment controller: the rollout of the current
// template is complete.
func (h *harness) rolledOut(name string) {
	h.t.Helper()
	d := h.deploy(name)
	d.Status.ObservedGeneration = d.Generation
	d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas = 2, 2, 2
	if err := h.c.Status().Update(context.Background(), d); err != nil {
		h.t.Fatal(err)
	}
}

// rollingOut plays the Deployment controller mid-rollout.
func (h *harness) rollingOut(name string) {
	h.t.Helper()
	d := h.deploy(name)
	d.Status.ObservedGeneration = d.Generation
	d.Status.UpdatedReplicas = 1
	d.Status.Replicas = 3
	if err := h.c.Status().Update(context.Background(), d); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) set(now string) { h.clock.SetTime(testutil.Time(h.t, now)) }

// wantRestartAt reconciles the schedule "s" at now and fails unless the
// Deployment name then carries the restarted-at value want (what says why).
func (h *harness) wantRestartAt(now, name, want, what string) {
	h.t.Helper()
	h.set(now)
	h.reconcile("s")
	if got := h.restartedAt(name); got != want {
		h.t.Fatalf("%s: restarted-at %q, want %q", what, got, want)
	}
}

func (h *harness) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hasEvent(evs []string, substr string) bool {
	for _, e := range evs {
		if strings.Contains(e, substr) {
			return true
		}
	}
	return false
}

func results(rs *deckhandv1alpha1.RestartSchedule) []string {
	var out []string
	for _, h := range rs.Status.History {
		out = append(out, string(h.Result)+" "+h.ScheduledTime.UTC().Format(time.RFC3339)+" "+h.Workload)
	}
	return out
}

func TestUnitCreateWaitsForFirstSlotThenRestartsOnce(t *testing.T) {
	h := newHarness(t, "2026-01-01T10:03:00Z", schedule("s", "*/10 * * * *", "2026-01-01T10:03:00Z"), deployment("web", nil))
	res := h.reconcile("s")
	if got := h.restartedAt("web"); got != "" {
		t.Fatalf("restarted at once on creation: %q", got)
	}
	if want := 7*time.Minute + requeueDelay; res.RequeueAfter != want {
		t.Fatalf("requeue after %s, want %s (next fire time + 100ms)", res.RequeueAfter, want)
	}
	if rs := h.rs("s"); rs.Status.NextScheduleTime == nil || !rs.Status.NextScheduleTime.Equal(ptr.To(metav1.NewTime(testutil.Time(t, "2026-01-01T10:10:00Z")))) {
		t.Fatalf("nextScheduleTime %v", rs.Status.NextScheduleTime)
	}

	h.wantRestartAt("2026-01-01T10:10:00.1Z", "web", "2026-01-01T10:10:00Z", "the slot time")
	if keep := h.deploy("web").Spec.Template.Annotations["keep"]; keep != "me" {
		t.Fatalf("the patch touched other template annotations")
	}
	rs := h.rs("s")
	if len(rs.Status.Active) != 1 || rs.Status.LastScheduleTime == nil {
		t.Fatalf("status after the patch: %+v", rs.Status)
	}

	// Retries before the rollout completes never patch again.
	h.rollingOut("web")
	rv := h.deploy("web").ResourceVersion
	h.set("2026-01-01T10:11:00Z")
	h.reconcile("s")
	h.reconcile("s")
	if h.deploy("web").ResourceVersion != rv {
		t.Fatalf("the workload was patched again for the same slot")
	}
	h.rolledOut("web")
	h.set("2026-01-01T10:12:00Z")
	h.reconcile("s")
	rs = h.rs("s")
	if got := results(rs); len(got) != 1 || got[0] != "Succeeded 2026-01-01T10:10:00Z Deployment/web" {
		t.Fatalf("history %v", got)
	}
	if len(rs.Status.Active) != 0 || rs.Status.LastSuccessfulTime == nil {
		t.Fatalf("status after success: %+v", rs.Status)
	}
	if !hasEvent(h.drainEvents(), "Normal Restarted") {
		t.Fatalf("no Restarted event")
	}
}

func TestUnitMissedRuns(t *testing.T) {
	cases := map[string]struct {
		deadline      *int64
		wantAnnot     string
		wantHistory   []string
		wantEvent     string
		wantTooMany   bool
		now, earliest string
	}{
		"only the latest missed slot runs": {
			now: "2026-01-01T13:25:00Z", earliest: "2026-01-01T10:00:00Z",
			wantAnnot: "2026-01-01T13:00:00Z", wantEvent: "3 scheduled times were missed"},
		"within startingDeadlineSeconds runs late": {
			deadline: ptr.To[int64](3600), now: "2026-01-01T13:25:00Z", earliest: "2026-01-01T10:00:00Z",
			wantAnnot: "2026-01-01T13:00:00Z"},
		"past startingDeadlineSeconds is Missed": {
			deadline: ptr.To[int64](60), now: "2026-01-01T13:25:00Z", earliest: "2026-01-01T10:00:00Z",
			wantHistory: []string{"Missed 2026-01-01T13:00:00Z "}, wantEvent: "Warning MissSchedule"},
		"more than 100 missed is reported and the latest runs": {
			now: "2026-01-10T12:30:00Z", earliest: "2026-01-01T00:00:00Z",
			wantAnnot: "2026-01-10T12:00:00Z", wantEvent: "Warning TooManyMissedTimes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rs := schedule("s", "0 * * * *", tc.earliest, func(rs *deckhandv1alpha1.RestartSchedule) {
				rs.Spec.StartingDeadlineSeconds = tc.deadline
			})
			h := newHarness(t, tc.now, rs, deployment("web", nil))
			h.reconcile("s")
			h.reconcile("s") // a second pass (a retry) changes nothing
			if got := h.restartedAt("web"); got != tc.wantAnnot {
				t.Fatalf("restarted-at %q, want %q", got, tc.wantAnnot)
			}
			if got := results(h.rs("s")); strings.Join(got, ",") != strings.Join(tc.wantHistory, ",") {
				t.Fatalf("history %q, want %q", got, tc.wantHistory)
			}
			evs := h.drainEvents()
			if tc.wantEvent != "" && !hasEvent(evs, tc.wantEvent) {
				t.Fatalf("no event %q in %q", tc.wantEvent, evs)
			}
			if st := h.rs("s").Status; st.NextScheduleTime == nil || st.HandledThrough == nil {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

func TestUnitConcurrencyPolicy(t *testing.T) {
	cases := map[string]struct {
		policy      deckhandv1alpha1.RestartConcurrencyPolicy
		wantAnnot   string
		wantHistory []string
	}{
		"Forbid skips while the previous restart rolls out": {
			policy: deckhandv1alpha1.RestartForbid, wantAnnot: "2026-01-01T11:00:00Z",
			wantHistory: []string{"Skipped 2026-01-01T12:00:00Z "}},
		"Replace restarts again": {
			policy: deckhandv1alpha1.RestartReplace, wantAnnot: "2026-01-01T12:00:00Z",
			wantHistory: []string{"Failed 2026-01-01T11:00:00Z Deployment/web"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rs := schedule("s", "0 * * * *", "2026-01-01T10:30:00Z", func(rs *deckhandv1alpha1.RestartSchedule) {
				rs.Spec.ConcurrencyPolicy = tc.policy
				rs.Spec.RolloutTimeout = &metav1.Duration{Duration: 3 * time.Hour}
			})
			h := newHarness(t, "2026-01-01T11:00:01Z", rs, deployment("web", nil))
			h.reconcile("s")
			h.rollingOut("web") // still rolling out at the next slot
			h.wantRestartAt("2026-01-01T12:00:01Z", "web", tc.wantAnnot, "at the next slot")
			st := h.rs("s").Status
			if got := results(h.rs("s")); strings.Join(got, ",") != strings.Join(tc.wantHistory, ",") {
				t.Fatalf("history %q, want %q", got, tc.wantHistory)
			}
			if len(st.Active) != 1 || st.Active[0].ScheduledTime.UTC().Format(time.RFC3339) != tc.wantAnnot {
				t.Fatalf("active %+v", st.Active)
			}
		})
	}
}

func TestUnitEditingScheduleNeverFiresRetroactively(t *testing.T) {
	rs := schedule("s", "0 3 * * *", "2026-01-01T00:00:00Z")
	h := newHarness(t, "2026-01-01T10:32:00Z", rs, deployment("web", nil))
	h.reconcile("s")
	if h.restartedAt("web") != "2026-01-01T03:00:00Z" {
		t.Fatalf("setup: the 03:00 slot after creation should have run")
	}
	h.rolledOut("web")
	h.reconcile("s")
	// Edit to a schedule whose slots (10:00, 10:05, ..., 10:30) lie between
	// the last run and now: none of them may fire.
	cur := h.rs("s")
	cur.Spec.Schedule = "*/5 * * * *"
	cur.Generation = 2
	if err := h.c.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	h.wantRestartAt("2026-01-01T10:33:00Z", "web", "2026-01-01T03:00:00Z", "the edit must not fire retroactively")
	if n := h.rs("s").Status.NextScheduleTime; n == nil || !n.Time.Equal(testutil.Time(t, "2026-01-01T10:35:00Z")) {
		t.Fatalf("next %v, want 10:35", n)
	}
	h.wantRestartAt("2026-01-01T10:35:00.1Z", "web", "2026-01-01T10:35:00Z", "the new schedule's first slot")
}

func TestUnitSuspendAndResume(t *testing.T) {
	rs := schedule("s", "0 * * * *", "2026-01-01T10:30:00Z", func(rs *deckhandv1alpha1.RestartSchedule) { rs.Spec.Suspend = true })
	h := newHarness(t, "2026-01-01T12:30:00Z", rs, deployment("web", nil))
	h.reconcile("s")
	st := h.rs("s").Status
	if h.restartedAt("web") != "" || st.NextScheduleTime != nil {
		t.Fatalf("suspended schedule ran or has a next time: %+v", st)
	}
	cur := h.rs("s")
	cur.Spec.Suspend = false
	if err := h.c.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	h.wantRestartAt("2026-01-01T12:40:00Z", "web", "", "resuming must not run a slot that passed while suspended")
	h.wantRestartAt("2026-01-01T13:00:00.1Z", "web", "2026-01-01T13:00:00Z", "the first slot after resuming")
}

func TestUnitPausedDeploymentSkipped(t *testing.T) {
	d := deployment("web", nil)
	d.Spec.Paused = true
	h := newHarness(t, "2026-01-01T11:00:01Z", schedule("s", "0 * * * *", "2026-01-01T10:30:00Z"), d)
	h.reconcile("s")
	if got := h.restartedAt("web"); got != "" {
		t.Fatalf("a paused Deployment was patched: %q", got)
	}
	got := h.rs("s").Status.History
	if len(got) != 1 || got[0].Result != deckhandv1alpha1.RestartSkipped || !strings.Contains(got[0].Message, "paused") {
		t.Fatalf("history %+v", got)
	}
}

func TestUnitRolloutFailures(t *testing.T) {
	cases := map[string]struct {
		mutate  func(d *appsv1.Deployment)
		advance string
		want    string
	}{
		"progress deadline exceeded": {
			mutate: func(d *appsv1.Deployment) {
				d.Status.UpdatedReplicas = 1
				d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet web-1 has timed out progressing."}}
			},
			advance: "2026-01-01T11:01:00Z", want: "exceeded its progress deadline"},
		"rollout timeout": {
			mutate:  func(d *appsv1.Deployment) { d.Status.UpdatedReplicas = 1 },
			advance: "2026-01-01T11:10:02Z", want: "did not complete within rolloutTimeout 10m0s"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, "2026-01-01T11:00:01Z", schedule("s", "0 * * * *", "2026-01-01T10:30:00Z"), deployment("web", nil))
			h.reconcile("s")
			d := h.deploy("web")
			d.Status.ObservedGeneration = d.Generation // the Deployment controller saw the restart
			tc.mutate(d)
			if err := h.c.Status().Update(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			h.set("2026-01-01T11:05:00Z")
			h.reconcile("s")
			if len(h.rs("s").Status.History) != 0 && name == "rollout timeout" {
				t.Fatalf("recorded before the timeout")
			}
			h.set(tc.advance)
			h.reconcile("s")
			st := h.rs("s").Status
			if len(st.History) != 1 || st.History[0].Result != deckhandv1alpha1.RestartFailed || !strings.Contains(st.History[0].Message, tc.want) {
				t.Fatalf("history %+v", st.History)
			}
			if !hasEvent(h.drainEvents(), "Warning RestartFailed") {
				t.Fatalf("no Warning event")
			}
			if c := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.RestartScheduleReadyCondition); c == nil || c.Status != metav1.ConditionFalse {
				t.Fatalf("Ready %+v", c)
			}
		})
	}
}

// A crash (or a status-write conflict) after the patch and before the
// status write: the retry finds the annotation already at the slot and
// follows that rollout without patching again.
func TestUnitCrashAfterPatchAdoptsTheRollout(t *testing.T) {
	d := deployment("web", nil)
	d.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation] = "2026-01-01T11:00:00Z"
	h := newHarness(t, "2026-01-01T11:00:30Z", schedule("s", "0 * * * *", "2026-01-01T10:30:00Z"), d)
	rv := h.deploy("web").ResourceVersion
	h.reconcile("s")
	if h.deploy("web").ResourceVersion != rv {
		t.Fatalf("patched again")
	}
	if st := h.rs("s").Status; len(st.Active) != 1 {
		t.Fatalf("not following the adopted rollout: %+v", st)
	}
}

// TestUnitStatusFollowsThePatch: the reconcile at a slot patches the
// workload and leaves the status to the next reconcile, which records the
// restart once, with the patched generation even when its cache has not
// seen the patch, and emits one Restarting Event. A crash in between (a
// new Reconciler, nothing remembered) adopts the rollout without patching.
func TestUnitStatusFollowsThePatch(t *testing.T) {
	for _, crash := range []bool{false, true} {
		h := newHarness(t, "2026-01-01T10:00:00.1Z", schedule("s", "0 * * * *", "2026-01-01T09:30:00Z"), deployment("web", nil))
		before := h.rs("s").ResourceVersion
		if res := h.reconcileOnce("s"); res.RequeueAfter != statusAfterPatchDelay {
			t.Fatalf("requeue after %s, want %s for the status write", res.RequeueAfter, statusAfterPatchDelay)
		}
		if got := h.restartedAt("web"); got != "2026-01-01T10:00:00Z" {
			t.Fatalf("restarted-at %q after the first reconcile", got)
		}
		if h.rs("s").ResourceVersion != before {
			t.Fatalf("the reconcile that patched also wrote the status")
		}
		if evs := h.drainEvents(); len(evs) != 0 {
			t.Fatalf("events before the status write: %v", evs)
		}
		if crash {
			h.r = &Reconciler{Client: h.c, Clock: h.clock, Recorder: h.events}
		}
		rv := h.deploy("web").ResourceVersion
		if res := h.reconcileOnce("s"); res.RequeueAfter == statusAfterPatchDelay {
			t.Fatalf("crash=%v: the second reconcile deferred the status again", crash)
		}
		if h.deploy("web").ResourceVersion != rv {
			t.Fatalf("crash=%v: patched again", crash)
		}
		st := h.rs("s").Status
		if len(st.Active) != 1 || st.Active[0].Generation != h.deploy("web").Generation {
			t.Fatalf("crash=%v: active %+v, want the patched generation %d", crash, st.Active, h.deploy("web").Generation)
		}
		restarting := 0
		for _, e := range h.drainEvents() {
			if strings.Contains(e, "Normal Restarting") {
				restarting++
			}
		}
		if want := map[bool]int{false: 1, true: 0}[crash]; restarting != want {
			t.Fatalf("crash=%v: %d Restarting events, want %d", crash, restarting, want)
		}
	}
}

func TestUnitSelectorRestartsOneAfterAnother(t *testing.T) {
	sel := map[string]string{"tier": "web"}
	rs := schedule("s", "0 * * * *", "2026-01-01T10:30:00Z", func(rs *deckhandv1alpha1.RestartSchedule) {
		rs.Spec.Target = deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: sel}}
	})
	h := newHarness(t, "2026-01-01T11:00:01Z", rs, deployment("a", sel), deployment("b", sel), deployment("c", sel), deployment("other", nil))
	h.reconcile("s")
	restarted := func() string {
		var out []string
		for _, n := range []string{"a", "b", "c", "other"} {
			if h.restartedAt(n) != "" {
				out = append(out, n)
			}
		}
		return strings.Join(out, "")
	}
	if got := restarted(); got != "a" {
		t.Fatalf("restarted %q first, want only a", got)
	}
	h.reconcile("s")
	if got := restarted(); got != "a" {
		t.Fatalf("restarted %q before a's rollout completed", got)
	}
	h.rolledOut("a")
	h.reconcile("s")
	if got := restarted(); got != "ab" {
		t.Fatalf("restarted %q, want a then b", got)
	}
	h.rolledOut("b")
	h.reconcile("s")
	h.rolledOut("c")
	h.reconcile("s")
	if got := restarted(); got != "abc" {
		t.Fatalf("restarted %q, want abc (never other)", got)
	}
	got := results(h.rs("s"))
	want := []string{"Succeeded 2026-01-01T11:00:00Z Deployment/c", "Succeeded 2026-01-01T11:00:00Z Deployment/b", "Succeeded 2026-01-01T11:00:00Z Deployment/a"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("history %q, want %q", got, want)
	}
}

func TestUnitHistoryIsBounded(t *testing.T) {
	rs := schedule("s", "0 * * * *", "2026-01-01T00:30:00Z", func(rs *deckhandv1alpha1.RestartSchedule) { rs.Spec.HistoryLimit = 3 })
	d := deployment("web", nil)
	d.Spec.Paused = true // every run is recorded Skipped at once
	h := newHarness(t, "2026-01-01T01:00:01Z", rs, d)
	for i := 1; i <= 6; i++ {
		h.set(time.Date(2026, 1, 1, i, 0, 1, 0, time.UTC).Format(time.RFC3339))
		h.reconcile("s")
	}
	got := results(h.rs("s"))
	if len(got) != 3 || !strings.HasPrefix(got[0], "Skipped 2026-01-01T06:00:00Z") {
		t.Fatalf("history %q, want the 3 newest", got)
	}
}

func TestUnitInvalidSchedule(t *testing.T) {
	h := newHarness(t, "2026-01-01T11:00:01Z", schedule("s", "0 0 31 2 *", "2026-01-01T10:30:00Z"), deployment("web", nil))
	h.reconcile("s")
	st := h.rs("s").Status
	c := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.RestartScheduleInvalidScheduleCondition)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "never fires") {
		t.Fatalf("InvalidSchedule %+v", c)
	}
	if st.NextScheduleTime != nil {
		t.Fatalf("next time set for an invalid schedule")
	}
}

// A run suspended in the middle: the rollout already started is followed to
// the end, no other workload starts while suspended, and on resume the run
// continues only if its slot is within startingDeadlineSeconds.
func TestUnitSuspendMidRun(t *testing.T) {
	cases := map[string]struct {
		deadline *int64
		resumeAt string
		wantB    string // b's restarted-at after resuming
		wantHist []string
	}{
		"resumed within the deadline": {
			deadline: ptr.To[int64](600), resumeAt: "2026-01-01T11:09:00Z", wantB: "2026-01-01T11:00:00Z",
			wantHist: []string{"Succeeded 2026-01-01T11:00:00Z Deployment/a"},
		},
		"resumed past the deadline": {
			deadline: ptr.To[int64](600), resumeAt: "2026-01-01T11:10:01Z", wantB: "",
			wantHist: []string{"Missed 2026-01-01T11:00:00Z Deployment/b", "Succeeded 2026-01-01T11:00:00Z Deployment/a"},
		},
		"no deadline": {
			resumeAt: "2026-01-01T11:50:00Z", wantB: "2026-01-01T11:00:00Z",
			wantHist: []string{"Succeeded 2026-01-01T11:00:00Z Deployment/a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sel := map[string]string{"tier": "web"}
			rs := schedule("s", "0 * * * *", "2026-01-01T10:30:00Z", func(rs *deckhandv1alpha1.RestartSchedule) {
				rs.Spec.Target = deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: sel}}
				rs.Spec.StartingDeadlineSeconds = tc.deadline
			})
			h := newHarness(t, "2026-01-01T11:00:01Z", rs, deployment("a", sel), deployment("b", sel))
			h.reconcile("s")
			if h.restartedAt("a") == "" {
				t.Fatalf("the run did not start")
			}
			setSuspend := func(v bool) {
				cur := h.rs("s")
				cur.Spec.Suspend = v
				if err := h.c.Update(context.Background(), cur); err != nil {
					t.Fatal(err)
				}
			}
			setSuspend(true)
			h.set("2026-01-01T11:01:00Z")
			h.reconcile("s")
			h.rolledOut("a")
			h.set("2026-01-01T11:02:00Z")
			h.reconcile("s")
			if got := h.restartedAt("b"); got != "" {
				t.Fatalf("b restarted while suspended: %q", got)
			}
			if got := results(h.rs("s")); strings.Join(got, ",") != "Succeeded 2026-01-01T11:00:00Z Deployment/a" {
				t.Fatalf("a's rollout was not followed to the end while suspended: %q", got)
			}
			h.drainEvents()

			setSuspend(false)
			h.wantRestartAt(tc.resumeAt, "b", tc.wantB, "b after resuming")
			st := h.rs("s").Status
			if got := results(h.rs("s")); strings.Join(got, ",") != strings.Join(tc.wantHist, ",") {
				t.Fatalf("history %q, want %q", got, tc.wantHist)
			}
			if len(st.Pending) != 0 {
				t.Fatalf("pending after resuming: %+v", st.Pending)
			}
			if got, want := hasEvent(h.drainEvents(), "MissSchedule"), tc.wantB == ""; got != want {
				t.Fatalf("MissSchedule event emitted: %v, want %v", got, want)
			}
		})
	}
}

// TestUnitStartsArePrioritized: a schedule waiting for its slot asks to be
// woken with the start priority; the reconciles that follow a restart (the
// status write, the rollout's polls) go back to the normal one rather than
// keeping the priority the woken request came with.
func TestUnitStartsArePrioritized(t *testing.T) {
	h := newHarness(t, "2026-01-01T09:59:00Z", schedule("s", "0 * * * *", "2026-01-01T09:30:00Z"), deployment("web", nil))
	priority := func(res ctrl.Result) string {
		if res.Priority == nil {
			return "unset (the request's own)"
		}
		return fmt.Sprint(*res.Priority)
	}
	if res := h.reconcile("s"); res.Priority != startPriority {
		t.Fatalf("waiting for the slot: priority %s, want the start priority %d", priority(res), *startPriority)
	}
	h.set("2026-01-01T10:00:00.1Z")
	if res := h.reconcileOnce("s"); res.RequeueAfter != statusAfterPatchDelay || res.Priority != normalPriority {
		t.Fatalf("after the patch: requeue after %s with priority %s, want %s with %d", res.RequeueAfter, priority(res), statusAfterPatchDelay, *normalPriority)
	}
	h.rollingOut("web")
	if res := h.reconcileOnce("s"); res.Priority != normalPriority {
		t.Fatalf("following the rollout (requeue after %s): priority %s, want %d", res.RequeueAfter, priority(res), *normalPriority)
	}
}

// TestUnitEvictionCountsUntilTheCacheShowsIt: a pod whose eviction the
// API server accepted still counts against maxConcurrent while the cache
// shows it Ready, so the next reconcile evicts no other pod of the
// workload; once the cache shows it gone and a Ready replacement, the next
// pod is evicted.
// webPod is a Ready pod of the Deployment web's ReplicaSet, created at
// created.
func webPod(t *testing.T, name, created string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: unitNS, UID: types.UID(name), CreationTimestamp: metav1.NewTime(testutil.Time(t, created)),
			Labels:          map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: "h"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-h", UID: "web-h", Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

// podAgeFixture is the Deployment web of replicas pods (webPod) and the
// schedule "s" replacing its pods older than an hour, one at a time.
func podAgeFixture(replicas int32) (*appsv1.Deployment, *deckhandv1alpha1.RestartSchedule) {
	d := deployment("web", nil)
	d.UID = "web"
	d.Spec.Replicas = ptr.To(replicas)
	d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	rs := schedule("s", "", "2026-01-01T00:00:00Z", func(rs *deckhandv1alpha1.RestartSchedule) {
		rs.Spec.Triggers = []deckhandv1alpha1.RestartNeedTrigger{{PodAge: &deckhandv1alpha1.RestartPodAgeTrigger{MaxAge: metav1.Duration{Duration: time.Hour}}}}
		rs.Spec.Action = deckhandv1alpha1.RestartAction{Scope: deckhandv1alpha1.RestartScopePod, MaxConcurrent: 1, MinPodAge: &metav1.Duration{}}
	})
	return d, rs
}

func TestUnitEvictionCountsUntilTheCacheShowsIt(t *testing.T) {
	pod := func(name, created string) *corev1.Pod { return webPod(t, name, created) }
	d, rs := podAgeFixture(2)
	h := newHarness(t, "2026-01-02T00:00:00Z", d, rs, pod("a", "2026-01-01T00:00:00Z"), pod("b", "2026-01-01T01:00:00Z"))

	h.reconcile("s")
	if fmt.Sprint(h.evicted) != "[a]" {
		t.Fatalf("evicted %v, want the oldest pod, a", h.evicted)
	}
	h.set("2026-01-02T00:00:10Z")
	h.reconcile("s")
	if fmt.Sprint(h.evicted) != "[a]" {
		t.Fatalf("evicted %v while the cache still shows a Ready: maxConcurrent 1 allows a alone", h.evicted)
	}

	if err := h.c.Delete(context.Background(), pod("a", "2026-01-01T00:00:00Z")); err != nil {
		t.Fatal(err)
	}
	if err := h.c.Create(context.Background(), pod("c", "2026-01-02T00:00:15Z")); err != nil {
		t.Fatal(err)
	}
	h.set("2026-01-02T00:00:20Z")
	h.reconcile("s")
	if fmt.Sprint(h.evicted) != "[a b]" {
		t.Fatalf("evicted %v, want b once a is gone and replaced", h.evicted)
	}
}

// An eviction whose status write is refused with a conflict (the reconcile
// read a copy older than its predecessor's write) is recorded, with its
// Event, by the next reconcile: the pod is gone, so nothing else would.
func TestUnitEvictionRecordedAfterAConflict(t *testing.T) {
	d, rs := podAgeFixture(1)
	h, pod := evictThroughAConflict(t, d, rs)
	if got := h.rs("s").Status.History; len(got) != 0 || len(h.drainEvents()) != 0 {
		t.Fatalf("the conflicting write left history %+v and Events", got)
	}
	// The pod is gone by the next reconcile.
	if err := h.c.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	h.set("2026-01-02T00:00:01Z")
	h.reconcileOnce("s")
	got := h.rs("s").Status.History
	if len(got) != 1 || got[0].Pod != "a" || got[0].Trigger != deckhandv1alpha1.RestartTriggerPodAge || !got[0].StartTime.Equal(ptr.To(metav1.NewTime(testutil.Time(t, "2026-01-02T00:00:00Z")))) {
		t.Fatalf("history %+v, want the eviction of a at its time", got)
	}
	if evs := h.drainEvents(); !hasEvent(evs, "evicted a of Deployment/web") {
		t.Fatalf("Events %v, want the eviction's", evs)
	}
	if last := h.rs("s").Status.LastTriggered; len(last) != 0 {
		// No cooldown: the entry is dropped once written.
		t.Fatalf("lastTriggered %+v", last)
	}
	// Told once.
	h.set("2026-01-02T00:00:02Z")
	h.reconcileOnce("s")
	if got := h.rs("s").Status.History; len(got) != 1 {
		t.Fatalf("history %+v, want the one eviction", got)
	}
}

// evictThroughAConflict runs one reconcile of schedule s over the pod "a"
// of d, old enough to be evicted, whose status write is refused with a
// conflict; it returns the harness and the pod, which is evicted.
func evictThroughAConflict(t *testing.T, d client.Object, rs *deckhandv1alpha1.RestartSchedule) (*harness, *corev1.Pod) {
	t.Helper()
	pod := webPod(t, "a", "2026-01-01T00:00:00Z")
	h := newHarness(t, "2026-01-02T00:00:00Z", d, rs, pod)
	h.conflictOnce()
	h.reconcileOnce("s")
	if fmt.Sprint(h.evicted) != "[a]" {
		t.Fatalf("evicted %v, want a", h.evicted)
	}
	return h, pod
}

// conflictOnce makes the reconciler's next status write fail with a
// conflict, as one from a stale cached copy does.
func (h *harness) conflictOnce() {
	conflicts := 1
	h.r.Client = interceptor.NewClient(h.c.(client.WithWatch), interceptor.Funcs{
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			if sub == "status" && conflicts > 0 {
				conflicts--
				return apierrors.NewConflict(deckhandv1alpha1.GroupVersion.WithResource("restartschedules").GroupResource(), "s", fmt.Errorf("the object has been modified"))
			}
			return c.SubResource(sub).Apply(ctx, obj, opts...)
		}})
}

// An eviction the conflicting write lost is still recorded when the next
// reconcile restarts a workload and leaves its status to the one after.
func TestUnitEvictionRecordedAcrossADeferredStatus(t *testing.T) {
	d, rs := podAgeFixture(1)
	rs.Spec.Schedule = "0 3 * * *"
	rs.CreationTimestamp = metav1.NewTime(testutil.Time(t, "2026-01-02T00:00:00Z"))
	h, pod := evictThroughAConflict(t, d, rs)
	if err := h.c.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	// The slot: this reconcile restarts the Deployment, the next writes.
	h.set("2026-01-02T03:00:00Z")
	if res := h.reconcileOnce("s"); res.RequeueAfter != statusAfterPatchDelay || h.restartedAt("web") == "" {
		t.Fatalf("the slot's reconcile returned %+v, restarted-at %q: want the Deployment restarted and the status deferred", res, h.restartedAt("web"))
	}
	h.reconcile("s")
	var evicted bool
	for _, e := range h.rs("s").Status.History {
		evicted = evicted || (e.Pod == "a" && e.Trigger == deckhandv1alpha1.RestartTriggerPodAge)
	}
	if !evicted {
		t.Fatalf("history %+v lacks the eviction of a", h.rs("s").Status.History)
	}
}
