package e2e

// The main flow of each kind, with the manager running as its own
// ServiceAccount: each test passing proves the ClusterRole suffices for it
// (namespace fails a test whose manager was refused anything on the way).

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestSidecarSetInjectsIntoDeploymentPods: a SidecarSet selecting a
// Deployment's pods gets its container injected into each of them at
// creation, by the Pod admission webhook the manager serves and the API
// server calls; its status counts them.
func TestSidecarSetInjectsIntoDeploymentPods(t *testing.T) {
	ns := namespace(t)
	labels := map[string]string{"app": "with-sidecar-" + ns}
	ss := sidecarSetFor(ns, labels, deckhandv1alpha1.SidecarContainer{
		Container: corev1.Container{Name: "log-shipper", Image: "registry.example/log-shipper:1"},
	})
	createObservedSidecarSet(t, ss)

	create(t, testutil.Deployment(ns, "app", 2, labels, pauseContainer))
	pods := waitReadyPods(t, ns, 2, labels)
	for _, p := range pods {
		names := []string{}
		for _, c := range p.Spec.Containers {
			names = append(names, c.Name)
		}
		if !slices.Contains(names, "log-shipper") || !slices.Contains(names, "app") {
			t.Errorf("pod %s has containers %v, want app and the injected log-shipper", p.Name, names)
		}
		if !strings.Contains(p.Annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation], ss.Name) {
			t.Errorf("pod %s lacks the %s annotation naming %s: %v", p.Name, deckhandv1alpha1.SidecarSetInjectedAnnotation, ss.Name, p.Annotations)
		}
	}
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		err := suite.client.Get(ctx, client.ObjectKeyFromObject(ss), ss)
		return err == nil && ss.Status.MatchedPods == 2 && ss.Status.UpdatedPods == 2 && ss.Status.ReadyPods == 2, err
	}, "SidecarSet status counts 2 matched, updated and ready pods (has %+v)", ss.Status)
}

// TestPodSetScalesUpAndDown: a PodSet of 3 gets 3 Ready pods; scaled to 1
// it deletes 2 of them.
func TestPodSetScalesUpAndDown(t *testing.T) {
	ns := namespace(t)
	labels := map[string]string{"app": "pset"}
	ps := testutil.PodSet(ns, "web", 3, labels, corev1.Container{Name: "web", Image: "registry.k8s.io/pause:3.10"})
	ps.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	create(t, ps)
	waitPodSet := func(n int32) {
		t.Helper()
		var pods []corev1.Pod
		testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ps), ps); err != nil {
				return false, err
			}
			var err error
			if pods, err = testutil.LivePods(ctx, suite.client, ns, labels); err != nil {
				return false, err
			}
			return int32(len(pods)) == n && countReady(pods) == n && ps.Status.ReadyReplicas == n && ps.Status.Replicas == n &&
				ps.Status.ObservedGeneration == ps.Generation, nil
		}, "PodSet %s/web has %d Ready pods and says so (pods %d, status %+v)", ns, n, len(pods), ps.Status)
	}
	waitPodSet(3)

	if err := suite.client.SubResource("scale").Patch(tctx(t), ps,
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":1}}`)),
		client.WithSubResourceBody(&autoscalingv1.Scale{})); err != nil {
		t.Fatalf("scaling the PodSet through /scale: %v", err)
	}
	waitPodSet(1)
}

// TestWebServerIsAvailable: a WebServer gets a Deployment and a Service of
// its own, their pods become Ready and the WebServer reports Available.
func TestWebServerIsAvailable(t *testing.T) {
	ns := namespace(t)
	ws := &deckhandv1alpha1.WebServer{
		ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: ns},
		Spec:       deckhandv1alpha1.WebServerSpec{Image: "nginx:1.27", Port: 80, Replicas: ptr.To[int32](2)},
	}
	create(t, ws)
	testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		err := suite.client.Get(ctx, client.ObjectKeyFromObject(ws), ws)
		return err == nil && meta.IsStatusConditionTrue(ws.Status.Conditions, deckhandv1alpha1.WebServerAvailableCondition) &&
			ws.Status.ReadyReplicas == 2 && ws.Status.ObservedGeneration == ws.Generation, err
	}, "WebServer %s/hello is Available with 2 ready replicas (status: ready %d, %s)", ns, ws.Status.ReadyReplicas, conditionsString(ws.Status.Conditions))

	ctx := tctx(t)
	dep := &appsv1.Deployment{}
	if err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, dep); err != nil {
		t.Fatalf("the WebServer's Deployment: %v", err)
	}
	svc := &corev1.Service{}
	if err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "hello"}, svc); err != nil {
		t.Fatalf("the WebServer's Service: %v", err)
	}
	for _, obj := range []client.Object{dep, svc} {
		if ref := metav1.GetControllerOf(obj); ref == nil || ref.UID != ws.UID {
			t.Errorf("%T hello is not controlled by the WebServer: %v", obj, obj.GetOwnerReferences())
		}
	}
	if dep.Status.ReadyReplicas != 2 {
		t.Errorf("Deployment hello has %d ready replicas, want 2", dep.Status.ReadyReplicas)
	}
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 80 {
		t.Errorf("Service hello ports = %+v, want port 80", svc.Spec.Ports)
	}
}

// TestRestartScheduleRestartsDeployment: an @every schedule restarts a
// Deployment (a rolling restart: new pods) and records the run as Succeeded.
func TestRestartScheduleRestartsDeployment(t *testing.T) {
	ns := namespace(t)
	labels := map[string]string{"app": "restart-me"}
	dep := testutil.Deployment(ns, "restart-me", 2, labels, pauseContainer)
	create(t, dep)
	testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		err := suite.client.Get(ctx, client.ObjectKeyFromObject(dep), dep)
		return err == nil && dep.Status.ReadyReplicas == 2, err
	}, "Deployment %s/restart-me is ready", ns)
	before, err := testutil.LivePods(tctx(t), suite.client, ns, labels)
	if err != nil {
		t.Fatal(err)
	}

	rs := &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Schedule: "@every 10s",
			Target: deckhandv1alpha1.RestartTarget{TargetRef: &deckhandv1alpha1.RestartWorkloadReference{
				Kind: "Deployment", Name: "restart-me",
			}},
		},
	}
	create(t, rs)
	var record deckhandv1alpha1.RestartRecord
	testutil.Eventually(t, 120*time.Second, func(ctx context.Context) (bool, error) {
		if err := suite.client.Get(ctx, client.ObjectKeyFromObject(rs), rs); err != nil {
			return false, err
		}
		for _, h := range rs.Status.History {
			if h.Result == deckhandv1alpha1.RestartSucceeded && h.Workload == "Deployment/restart-me" {
				record = h
				return true, nil
			}
		}
		return false, nil
	}, "RestartSchedule %s/nightly records a Succeeded restart of Deployment/restart-me (history %+v)", ns, rs.Status.History)
	t.Logf("restart recorded: %s %s", record.Result, record.Message)

	if err := suite.client.Get(tctx(t), client.ObjectKeyFromObject(dep), dep); err != nil {
		t.Fatal(err)
	}
	if dep.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation] == "" {
		t.Errorf("the Deployment's pod template lacks %s: %v", deckhandv1alpha1.RestartedAtAnnotation, dep.Spec.Template.Annotations)
	}
	after, err := testutil.LivePods(tctx(t), suite.client, ns, labels)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range after {
		for _, b := range before {
			if a.UID == b.UID {
				t.Errorf("pod %s survived the restart", a.Name)
			}
		}
	}
}
