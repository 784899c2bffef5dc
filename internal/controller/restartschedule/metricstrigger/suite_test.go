// Package metricstrigger_test runs RestartSchedule triggers against real
// metrics: a control plane whose fake nodes report simulated usage, served
// by metrics-server through the aggregation layer (localcluster
// Options.Metrics). It has a package of its own so that the main suite keeps
// a control plane with no metrics API.
package metricstrigger_test

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	restartschedule "github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	restartschedulewebhook "github.com/deckhand-dev/deckhand/internal/webhook/restartschedule"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	opts := localcluster.Full(1)
	opts.Metrics = true
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Cluster: &opts,
		Setup: func(mgr ctrl.Manager) error {
			if err := (&restartschedule.Reconciler{PollInterval: 2 * time.Second}).SetupWithManager(mgr); err != nil {
				return err
			}
			return restartschedulewebhook.SetupWebhook(mgr, &restartschedulewebhook.Validator{MinInterval: time.Second})
		},
	}))
}

func needEnv(t *testing.T) {
	t.Helper()
	if env == nil {
		t.Skip("integration test: needs the local control plane (not with -short)")
	}
}

// deployment is a Deployment of replicas pods labelled app=name on the fake
// node, one container "app" with the given limits, its pods annotated with
// annotations (simulated usage); it replaces one pod at a time.
func deployment(ns, name string, replicas int32, annotations map[string]string, limits corev1.ResourceList) *appsv1.Deployment {
	d := testutil.Deployment(ns, name, replicas, map[string]string{"app": name}, corev1.Container{Name: "app", Image: "registry.example/app:1",
		Resources: corev1.ResourceRequirements{Limits: limits}})
	d.Spec.Template.Annotations = annotations
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0)),
	}}
	return d
}

// readyPods waits until the n pods of Deployment d are Ready and returns
// them.
func readyPods(t *testing.T, d *appsv1.Deployment, n int) []corev1.Pod {
	t.Helper()
	return testutil.WaitReadyPods(t, env.Client, d.Namespace, d.Spec.Selector.MatchLabels, n)
}

// podScope is a RestartSchedule with no schedule that evicts the pods of
// Deployment target its triggers name, one at a time and at any age.
func podScope(ns, name, target string, triggers ...deckhandv1alpha1.RestartNeedTrigger) *deckhandv1alpha1.RestartSchedule {
	return &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Target:   deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{Kind: "Deployment", Name: target}},
			Triggers: triggers,
			Action:   deckhandv1alpha1.RestartAction{Scope: deckhandv1alpha1.RestartScopePod, MaxConcurrent: 1, MinPodAge: &metav1.Duration{}},
		},
	}
}

// waitSchedule waits until the schedule satisfies done and returns it; on
// failure the last status read is logged.
func waitSchedule(t *testing.T, rs *deckhandv1alpha1.RestartSchedule, timeout time.Duration, what string, done func(*deckhandv1alpha1.RestartSchedule) bool) *deckhandv1alpha1.RestartSchedule {
	t.Helper()
	var got *deckhandv1alpha1.RestartSchedule
	t.Cleanup(func() {
		if t.Failed() && got != nil {
			t.Logf("last status of %s: candidates %+v, history %+v, conditions %+v", rs.Name, got.Status.Candidates, got.Status.History, got.Status.Conditions)
		}
	})
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		cur := &deckhandv1alpha1.RestartSchedule{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rs), cur); err != nil {
			return false, err
		}
		got = cur
		return done(cur), nil
	}, "%s", what)
	return got
}

// startLeak watches the pods of d for deletions and sets the leak
// annotation of simulated usage on pods[0] to perSecond; it returns the
// watch and when the leak started.
func startLeak(ctx context.Context, t *testing.T, d *appsv1.Deployment, pods []corev1.Pod, annotation, perSecond string) (*testutil.DisruptionWatch, time.Time) {
	t.Helper()
	watch := testutil.WatchDisruptions(t, env.Clientset, d.Namespace, labels.SelectorFromSet(d.Spec.Selector.MatchLabels), len(pods))
	started := time.Now()
	leak := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotation, perSecond)
	if err := env.Client.Patch(ctx, &pods[0], client.RawPatch(types.MergePatchType, []byte(leak))); err != nil {
		t.Fatal(err)
	}
	return watch, started
}

// leakingDeployment is a Deployment of two pods on the fake node, in a
// namespace of its own, whose first pod leaks.
type leakingDeployment struct {
	ctx           context.Context
	ns            string
	deployment    *appsv1.Deployment
	leaking, flat string
	// watch follows the pods' deletions from before the leak started.
	watch   *testutil.DisruptionWatch
	started time.Time
}

// startMemoryLeak creates a leakingDeployment "web" of two pods at 64Mi of
// a 256Mi limit whose leaking pod grows perSecond, with a context that ends
// after timeout.
func startMemoryLeak(t *testing.T, timeout time.Duration, perSecond string) leakingDeployment {
	t.Helper()
	return startLeaking(t, timeout, "web", map[string]string{localcluster.SimMemoryWorkingSetAnnotation: "64Mi"},
		corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}, localcluster.SimMemoryLeakPerSecondAnnotation, perSecond)
}

// startGPULeak creates a leakingDeployment "gpu" of two pods at 1024 MiB of
// GPU memory whose leaking pod grows perSecond MiB, with a context that
// ends after timeout.
func startGPULeak(t *testing.T, timeout time.Duration, perSecond string) leakingDeployment {
	t.Helper()
	return startLeaking(t, timeout, "gpu", map[string]string{localcluster.SimGPUMemoryUsedAnnotation: "1024"}, nil,
		localcluster.SimGPUMemoryLeakAnnotation, perSecond)
}

// startLeaking creates a leakingDeployment name whose pods start with the
// simulated usage annotations say, under limits, then sets the first
// pod's leakAnnotation to perSecond.
func startLeaking(t *testing.T, timeout time.Duration, name string, annotations map[string]string, limits corev1.ResourceList, leakAnnotation, perSecond string) leakingDeployment {
	t.Helper()
	needEnv(t)
	m := leakingDeployment{ctx: testutil.Context(t, timeout), ns: env.Namespace(t)}
	m.deployment = deployment(m.ns, name, 2, annotations, limits)
	testutil.Create(m.ctx, t, env.Client, m.deployment)
	pods := readyPods(t, m.deployment, 2)
	m.leaking, m.flat = pods[0].Name, pods[1].Name
	m.watch, m.started = startLeak(m.ctx, t, m.deployment, pods, leakAnnotation, perSecond)
	return m
}

// schedule creates a RestartSchedule name of the Deployment with podScope's
// action and triggers.
func (m leakingDeployment) schedule(t *testing.T, name string, triggers ...deckhandv1alpha1.RestartNeedTrigger) *deckhandv1alpha1.RestartSchedule {
	t.Helper()
	rs := podScope(m.ns, name, m.deployment.Name, triggers...)
	testutil.Create(m.ctx, t, env.Client, rs)
	return rs
}

// predictionSchedule creates a RestartSchedule name of the Deployment with
// podScope's action and trigger, whose only window is window, with
// urgency.predictedLimitWithin urgentWithin when urgent.
func (m leakingDeployment) predictionSchedule(t *testing.T, name string, trigger deckhandv1alpha1.RestartNeedTrigger, window deckhandv1alpha1.RestartWindow, urgent bool) *deckhandv1alpha1.RestartSchedule {
	t.Helper()
	rs := podScope(m.ns, name, m.deployment.Name, trigger)
	rs.Spec.Windows = []deckhandv1alpha1.RestartWindow{window}
	if urgent {
		rs.Spec.Urgency = &deckhandv1alpha1.RestartUrgency{PredictedLimitWithin: metav1.Duration{Duration: urgentWithin}}
	}
	testutil.Create(m.ctx, t, env.Client, rs)
	return rs
}

// urgentWithin is predictionSchedule's urgency.predictedLimitWithin.
const urgentWithin = 10 * time.Minute

// windowIn is a daily window that opens from now (negative: already open)
// and lasts length, in UTC.
func windowIn(from, length time.Duration) deckhandv1alpha1.RestartWindow {
	opens := time.Now().UTC().Add(from)
	return deckhandv1alpha1.RestartWindow{Start: opens.Format("15:04"), End: opens.Add(length).Format("15:04")}
}

// expectPredictedEviction checks that the schedule evicts the leaking pod
// for its prediction: history records trigger, the pod, a value under the
// threshold under and the limit the prediction aimed at; urgent, the
// prediction is within urgentWithin and an UrgentRestart Event names the
// pod and the closed window; and the flat pod is never named, nor the
// replacement.
func expectPredictedEviction(t *testing.T, rs *deckhandv1alpha1.RestartSchedule, leak leakingDeployment, trigger deckhandv1alpha1.RestartTrigger, under, limit string, urgent bool) {
	t.Helper()
	evicted := waitEvicted(t, rs, trigger, 3*time.Minute)
	if evicted.Pod != leak.leaking || evicted.Result != deckhandv1alpha1.RestartSucceeded || evicted.PredictedLimitAt == nil {
		t.Fatalf("history entry %+v, want the leaking pod %s evicted with its prediction", evicted, leak.leaking)
	}
	// Evicted for its prediction, not its threshold.
	if v, err := resource.ParseQuantity(evicted.Value); err != nil || v.Cmp(resource.MustParse(under)) >= 0 {
		t.Fatalf("history value %q, want one under the threshold (%s)", evicted.Value, under)
	}
	if !strings.Contains(evicted.Message, "predicted to reach "+limit+" at ") {
		t.Errorf("history message %q does not give the prediction of %s", evicted.Message, limit)
	}
	if got := strings.Contains(evicted.Message, "within spec.urgency.predictedLimitWithin"); got != urgent {
		t.Errorf("history message %q: urgent %v, want %v", evicted.Message, got, urgent)
	}
	if urgent {
		if p := evicted.PredictedLimitAt; p.After(evicted.StartTime.Add(urgentWithin)) {
			t.Fatalf("predicted at %s, want within %s of the eviction at %s", p, urgentWithin, evicted.StartTime)
		}
		testutil.WaitEvent(t, env.Client, leak.ns, 30*time.Second, "an UrgentRestart Event naming the pod and the closed window", func(e eventsv1.Event) bool {
			return e.Reason == "UrgentRestart" && e.Regarding.Name == rs.Name &&
				strings.Contains(e.Note, leak.leaking) && strings.Contains(e.Note, "outside every maintenance window")
		})
	}
	readyPods(t, leak.deployment, 2)
	waitSchedule(t, rs, 60*time.Second, "no candidate once the leaking pod is replaced", func(got *deckhandv1alpha1.RestartSchedule) bool {
		return got.Status.CandidateCount == 0
	})
	onlyDeleted(t, leak.watch, leak.leaking)
}

// memoryTrigger is a memory trigger on container "app" above percent of
// its limit for sustained.
func memoryTrigger(percent int32, sustained time.Duration) deckhandv1alpha1.RestartNeedTrigger {
	return deckhandv1alpha1.RestartNeedTrigger{Memory: &deckhandv1alpha1.RestartMemoryTrigger{
		Container: "app", PercentOfLimit: ptr.To(percent), For: &metav1.Duration{Duration: sustained}}}
}

// heldFor is how a candidate held by a trigger's `for` of sustained starts.
func heldFor(sustained time.Duration) string {
	return fmt.Sprintf("for %s: above the threshold since ", sustained)
}

// waitHeld waits until pod is a candidate of trigger whose heldBy starts
// with held.
func waitHeld(t *testing.T, rs *deckhandv1alpha1.RestartSchedule, pod string, trigger deckhandv1alpha1.RestartTrigger, held string, timeout time.Duration) {
	t.Helper()
	waitSchedule(t, rs, timeout, fmt.Sprintf("%s a candidate held %q", pod, held), func(got *deckhandv1alpha1.RestartSchedule) bool {
		return slices.ContainsFunc(got.Status.Candidates, func(c deckhandv1alpha1.RestartCandidate) bool {
			return c.Pod == pod && c.Trigger == trigger && strings.HasPrefix(c.HeldBy, held)
		})
	})
}

// stopMetricsServer stops the cluster's metrics-server for the rest of t;
// it is started again when t ends if t has not, so that the next test has
// a metrics API.
func stopMetricsServer(t *testing.T) {
	t.Helper()
	if err := env.Cluster.StopMetricsServer(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := env.Cluster.StartMetricsServer(ctx); err != nil && !strings.Contains(err.Error(), "metrics-server is running") {
			t.Errorf("starting metrics-server again: %v", err)
		}
	})
}

// counterValue is the value of the manager's counter name in the series
// with labels (0 when there is none).
func counterValue(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if maps.Equal(got, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
