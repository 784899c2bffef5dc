package restartschedule_test

// Integration tests against a real control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok fake nodes on which pods
// become Running and Ready) with the in-process manager running the
// RestartSchedule controllers and webhook. Short @every schedules keep each
// test to seconds. `go test -short` runs only the unit tests.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/podset"
	restartschedule "github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	restartschedulewebhook "github.com/deckhand-dev/deckhand/internal/webhook/restartschedule"
)

const testDefaultSchedule = "0 3 * * *"

var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Full: true,
		Setup: func(mgr ctrl.Manager) error {
			// Polls a minute apart: a test that waits less for a step shows
			// that an event, not the poll, brought it (the turns of
			// maxConcurrent come from the pods' readiness).
			if err := (&restartschedule.Reconciler{Clock: testClock, PollInterval: time.Minute}).SetupWithManager(mgr); err != nil {
				return err
			}
			// PodSets are a target kind: their own controller rolls them out.
			if err := (&podset.Reconciler{}).SetupWithManager(mgr); err != nil {
				return err
			}
			if err := (&restartschedule.AnnotationReconciler{DefaultSchedule: testDefaultSchedule}).SetupWithManager(mgr); err != nil {
				return err
			}
			// Short @every schedules keep the tests quick.
			return restartschedulewebhook.SetupWebhook(mgr, &restartschedulewebhook.Validator{MinInterval: time.Second})
		},
	}))
}

// testClock is the controller's clock in these tests: real time, plus an
// offset a test can move forward (advanceClock) to be minutes later without
// waiting minutes.
var testClock = &shiftedClock{}

type shiftedClock struct{ offset atomic.Int64 }

func (c *shiftedClock) Now() time.Time                  { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *shiftedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// advanceClock moves the controller's clock forward by d until t ends.
// Tests in this package do not run in parallel, so no other test sees it.
func advanceClock(t *testing.T, d time.Duration) {
	testClock.offset.Add(int64(d))
	t.Cleanup(func() { testClock.offset.Add(-int64(d)) })
}

func needEnv(t *testing.T) {
	t.Helper()
	if env == nil {
		t.Skip("integration test: needs the local control plane (not with -short)")
	}
}

// ctx bounds a test's requests by two minutes.
func ctx(t *testing.T) context.Context { return testutil.Context(t, 2*time.Minute) }

// newDeployment is a Deployment whose pods kwok runs; it rolls out one pod
// at a time (maxUnavailable 1, maxSurge 0).
func newDeployment(ns, name string, replicas int32, labels, annotations map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	podLabels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
			},
		},
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	testutil.Create(ctx(t), t, env.Client, obj)
}

func getDeploy(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d := testutil.Get(ctx(t), t, env.Client, types.NamespacedName{Namespace: ns, Name: name}, &appsv1.Deployment{})
	return d
}

func rolledOut(d *appsv1.Deployment) bool {
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == *d.Spec.Replicas &&
		s.Replicas == s.UpdatedReplicas && s.AvailableReplicas == s.UpdatedReplicas
}

func waitRolledOut(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	var d *appsv1.Deployment
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		d = &appsv1.Deployment{}
		if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			return false, err
		}
		return rolledOut(d) && d.Status.AvailableReplicas == *d.Spec.Replicas, nil
	}, "Deployment %s/%s is rolled out and available", ns, name)
	return d
}

func getRS(ctx context.Context, ns, name string) (*deckhandv1alpha1.RestartSchedule, error) {
	rs := &deckhandv1alpha1.RestartSchedule{}
	return rs, env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, rs)
}

func targetRef(name string) deckhandv1alpha1.RestartTarget {
	return deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: name}}
}

// waitRS waits until the RestartSchedule ns/name exists and satisfies
// cond, and returns it.
func waitRS(t *testing.T, ns, name string, timeout time.Duration, what string, cond func(*deckhandv1alpha1.RestartSchedule) bool) *deckhandv1alpha1.RestartSchedule {
	t.Helper()
	var rs *deckhandv1alpha1.RestartSchedule
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		var err error
		if rs, err = getRS(ctx, ns, name); err != nil {
			return false, err
		}
		if cond(rs) {
			return true, nil
		}
		// What a timeout prints: the status as last seen.
		return false, fmt.Errorf("status as last seen: %s", statusSummary(rs))
	}, "RestartSchedule %s/%s: %s", ns, name, what)
	return rs
}

// statusSummary is what a failed wait shows of a RestartSchedule: its
// generation, suspension and the status fields the waits read.
func statusSummary(rs *deckhandv1alpha1.RestartSchedule) string {
	var b strings.Builder
	fmt.Fprintf(&b, "generation %d, suspend %t, observedGeneration %d; history:", rs.Generation, rs.Spec.Suspend, rs.Status.ObservedGeneration)
	for _, h := range rs.Status.History {
		fmt.Fprintf(&b, " [%s %s %s %q]", formatRFC3339(h.ScheduledTime), h.Workload, h.Result, h.Message)
	}
	b.WriteString("; pending:")
	for _, p := range rs.Status.Pending {
		fmt.Fprintf(&b, " [%s %s]", formatRFC3339(p.ScheduledTime), p.Name)
	}
	b.WriteString("; conditions:")
	for _, c := range rs.Status.Conditions {
		fmt.Fprintf(&b, " [%s=%s %s]", c.Type, c.Status, c.Reason)
	}
	return b.String()
}

// waitHistory waits until the RestartSchedule's history has an entry that
// satisfies match, and returns the schedule.
func waitHistory(t *testing.T, ns, name, what string, match func(deckhandv1alpha1.RestartRecord) bool) *deckhandv1alpha1.RestartSchedule {
	t.Helper()
	return waitRS(t, ns, name, 90*time.Second, "records "+what, func(rs *deckhandv1alpha1.RestartSchedule) bool {
		return slices.ContainsFunc(rs.Status.History, match)
	})
}

// createRolledOut creates the Deployments, then waits until each is rolled
// out and available.
func createRolledOut(t *testing.T, ds ...*appsv1.Deployment) {
	t.Helper()
	for _, d := range ds {
		create(t, d)
	}
	for _, d := range ds {
		waitRolledOut(t, d.Namespace, d.Name)
	}
}

// rolledOutPods creates the Deployment, waits until it is rolled out and
// returns the names of its pods (newDeployment's app label).
func rolledOutPods(t *testing.T, d *appsv1.Deployment) map[string]bool {
	t.Helper()
	createRolledOut(t, d)
	return podNames(t, d.Namespace, d.Name)
}

// runNow sends the RestartSchedule a run-now token.
func runNow(t *testing.T, ns, name, token string) {
	t.Helper()
	patchRS(t, ns, name, `{"metadata":{"annotations":{"`+deckhandv1alpha1.RestartScheduleRunNowAnnotation+`":"`+token+`"}}}`)
}

// waitWarningEvent waits for a Warning Event of reason about the object
// called regarding in ns.
func waitWarningEvent(t *testing.T, ns, regarding, reason string) {
	t.Helper()
	testutil.WaitEvent(t, env.Client, ns, 30*time.Second, fmt.Sprintf("a %s Warning Event about %s/%s", reason, ns, regarding), func(e eventsv1.Event) bool {
		return e.Reason == reason && e.Regarding.Name == regarding && e.Type == corev1.EventTypeWarning
	})
}

func patchRS(t *testing.T, ns, name, body string) {
	t.Helper()
	rs := &deckhandv1alpha1.RestartSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.Client.Patch(ctx(t), rs, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
		t.Fatalf("patching RestartSchedule %s: %v", name, err)
	}
}

func patchDeploy(t *testing.T, ns, name, body string) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.Client.Patch(ctx(t), d, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
		t.Fatalf("patching Deployment %s: %v", name, err)
	}
}

// consistently checks cond every 100ms for d; it is used only for "nothing
// happens" assertions, after an action that would have triggered the change.
func consistently(t *testing.T, d time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := cond(ctx(t)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func podNames(t *testing.T, ns, app string) map[string]bool {
	t.Helper()
	var pods corev1.PodList
	if err := env.Client.List(ctx(t), &pods, client.InNamespace(ns), client.MatchingLabels{"app": app}); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = true
		}
	}
	return out
}

func unstructuredRS(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": deckhandv1alpha1.GroupVersion.String(),
		"kind":       "RestartSchedule",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec":       spec,
	}}
	return u
}

// watchDeployments watches the namespace's Deployments.
func watchDeployments(ctx context.Context, ns string) (watch.Interface, error) {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return nil, err
	}
	return wc.Watch(ctx, &appsv1.DeploymentList{}, client.InNamespace(ns))
}
