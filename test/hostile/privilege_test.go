package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// policyName is the admission policy config/default installs on the
// manager's ServiceAccount (config/admission-policy).
const policyName = "deckhand-manager-writes"

// managerClientset is a clientset with the manager's own credentials: what
// a stolen token of its ServiceAccount can do.
func managerClientset(t *testing.T) kubernetes.Interface {
	t.Helper()
	id, err := suite.Cluster.InstallManagerIdentity(ctx(t, time.Minute), suite.root)
	if err != nil {
		t.Fatalf("manager identity: %v", err)
	}
	cfg := rest.CopyConfig(id.Config)
	cfg.QPS = -1 // the test's own waits bound it, not client-side rate limits
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// refusedByPolicy reports whether err is the admission policy's refusal
// (and not RBAC's: RBAC allows every write tried here).
func refusedByPolicy(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), policyName)
}

func barePod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "bare"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

func mergePatch(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestManagerServiceAccountIsConfinedToItsOwnWrites: RBAC lets Deckhand's
// ServiceAccount create any pod and patch any Deployment; the admission
// policy lets it create only pods a PodSet controls and change a Deployment
// it does not own only by the restart annotations. Anyone else is not
// matched.
func TestManagerServiceAccountIsConfinedToItsOwnWrites(t *testing.T) {
	ensureDeckhand(t)
	ns := testutil.Namespace(t, suite.Client)
	mgr := managerClientset(t)

	// The API server enforces a policy once its informer has it: wait for
	// the first refusal (a bare pod that got through is removed again).
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		_, err := mgr.CoreV1().Pods(ns).Create(ctx, barePod(ns, "bare"), metav1.CreateOptions{})
		if err == nil {
			return false, suite.Clientset.CoreV1().Pods(ns).Delete(ctx, "bare", metav1.DeleteOptions{})
		}
		if refusedByPolicy(err) {
			return true, nil
		}
		return false, err
	}, "the admission policy refuses the manager a pod without a PodSet owner")

	c := ctx(t, 2*time.Minute)
	d := testutil.Deployment(ns, "app", 2, map[string]string{"app": "app"}, corev1.Container{Name: "app", Image: "registry.k8s.io/pause:3.10"})
	if err := suite.Client.Create(c, d); err != nil {
		t.Fatal(err)
	}
	bystander := barePod(ns, "bystander")
	if err := suite.Client.Create(c, bystander); err != nil {
		t.Fatal(err)
	}

	refused := map[string]func() error{
		"change a Deployment's image": func() error {
			_, err := mgr.AppsV1().Deployments(ns).Patch(c, "app", types.StrategicMergePatchType, mergePatch(t, map[string]any{
				"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
					"containers": []any{map[string]any{"name": "app", "image": "attacker.example/app:evil"}}}}}}), metav1.PatchOptions{})
			return err
		},
		"scale a Deployment": func() error {
			_, err := mgr.AppsV1().Deployments(ns).Patch(c, "app", types.MergePatchType, mergePatch(t, map[string]any{"spec": map[string]any{"replicas": 0}}), metav1.PatchOptions{})
			return err
		},
		"smuggle another pod-template annotation in with the restart": func() error {
			_, err := mgr.AppsV1().Deployments(ns).Patch(c, "app", types.MergePatchType, mergePatch(t, map[string]any{
				"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": map[string]string{
					deckhandv1alpha1.RestartedAtAnnotation: "2026-01-01T00:00:00Z", "example.com/other": "x"}}}}}), metav1.PatchOptions{})
			return err
		},
		"relabel a pod it neither owns nor injected": func() error {
			_, err := mgr.CoreV1().Pods(ns).Patch(c, "bystander", types.MergePatchType, mergePatch(t, map[string]any{
				"metadata": map[string]any{"labels": map[string]string{"app": "stolen"}}}), metav1.PatchOptions{})
			return err
		},
		"delete a pod it does not own": func() error {
			return mgr.CoreV1().Pods(ns).Delete(c, "bystander", metav1.DeleteOptions{})
		},
	}
	for name, write := range refused {
		if err := write(); !refusedByPolicy(err) {
			t.Errorf("%s: got %v, want the refusal of %s", name, err, policyName)
		}
	}

	// What the RestartSchedule controller writes passes: the pod template's
	// restart annotation, and the generated-schedule marker.
	if _, err := mgr.AppsV1().Deployments(ns).Patch(c, "app", types.MergePatchType, mergePatch(t, map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{deckhandv1alpha1.RestartScheduleGeneratedAnnotation: "app-deployment"}},
		"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			deckhandv1alpha1.RestartedAtAnnotation: "2026-01-01T00:00:00Z"}}}},
	}), metav1.PatchOptions{}); err != nil {
		t.Errorf("the restart patch was refused: %v", err)
	}
	// A DaemonSet's restart too, though the API server also counts its
	// template generation in an annotation of its own.
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns}, Spec: appsv1.DaemonSetSpec{
		Selector: d.Spec.Selector, Template: d.Spec.Template}}
	if err := suite.Client.Create(c, ds); err != nil {
		t.Fatal(err)
	}
	if _, err := mgr.AppsV1().DaemonSets(ns).Patch(c, "agent", types.MergePatchType, mergePatch(t, map[string]any{
		"spec": map[string]any{"template": map[string]any{"metadata": map[string]any{"annotations": map[string]string{
			deckhandv1alpha1.RestartedAtAnnotation: "2026-01-01T00:00:00Z"}}}},
	}), metav1.PatchOptions{}); err != nil {
		t.Errorf("the restart patch of a DaemonSet was refused: %v", err)
	}
	// A pod a PodSet controls may be created.
	owned := barePod(ns, "owned")
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: deckhandv1alpha1.GroupVersion.String(), Kind: "PodSet",
		Name: "web", UID: uuid.NewUUID(), Controller: ptr.To(true)}}
	if _, err := mgr.CoreV1().Pods(ns).Create(c, owned, metav1.CreateOptions{}); err != nil {
		t.Errorf("creating a pod a PodSet controls: %v", err)
	}
	// The policy matches nobody else: an administrator may change the image.
	if _, err := suite.Clientset.AppsV1().Deployments(ns).Patch(c, "app", types.MergePatchType, mergePatch(t, map[string]any{
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "image": "registry.k8s.io/pause:3.9"}}}}}}), metav1.PatchOptions{}); err != nil {
		t.Errorf("an administrator's image change was refused: %v", err)
	}
}

// TestManagerWritesPassTheAdmissionPolicy: the manager's own writes of the
// kinds the policy matches go through it: a PodSet's pods, and the restart
// a RestartSchedule makes on a Deployment (the manager's refusals are
// checked for the whole suite in TestMain too).
func TestManagerWritesPassTheAdmissionPolicy(t *testing.T) {
	ensureDeckhand(t)
	ns := testutil.Namespace(t, suite.Client)
	c := ctx(t, 2*time.Minute)

	labels := map[string]string{"app": "web"}
	ps := testutil.PodSet(ns, "web", 2, labels, corev1.Container{Name: "web", Image: "registry.k8s.io/pause:3.10"})
	if err := suite.Client.Create(c, ps); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		pods, err := testutil.LivePods(ctx, suite.Client, ns, labels)
		return len(pods) == 2, err
	}, "the PodSet's two pods exist")

	restartNow(t, ns)

	if lines := suite.Cluster.ManagerRefusals(); len(lines) > 0 {
		t.Errorf("the manager was refused %d request(s):\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

// restartNow creates a Deployment and a RestartSchedule asked to run now on
// it, and waits until the manager has restarted the Deployment (its restart
// annotation is set).
func restartNow(t *testing.T, ns string) {
	t.Helper()
	c := ctx(t, 2*time.Minute)
	d := testutil.Deployment(ns, "restarted", 1, map[string]string{"app": "restarted"}, corev1.Container{Name: "app", Image: "registry.k8s.io/pause:3.10"})
	testutil.Create(c, t, suite.Client, d)
	rs := restartSchedule(ns, "restarted", "0 3 * * *")
	rs.Spec.Target.TargetRef.Name = d.Name
	rs.Annotations = map[string]string{deckhandv1alpha1.RestartScheduleRunNowAnnotation: "now"}
	testutil.Create(c, t, suite.Client, rs)
	testutil.Eventually(t, time.Minute, func(ctx context.Context) (bool, error) {
		var got appsv1.Deployment
		err := suite.Client.Get(ctx, client.ObjectKeyFromObject(d), &got)
		return got.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation] != "", err
	}, "the manager restarted the Deployment (its restart annotation is set)")
}

// A manager run with --controllers=restartschedule reconciles
// RestartSchedules and admits them through its webhook, serves no pod
// webhook, keeps no pod informer, and refuses the kinds it does not run
// with a message naming the flag, through the webhook configurations of a
// full installation.
func TestRestartScheduleOnlyManager(t *testing.T) {
	d := replaceManager(t, "deckhand-restartschedule-only", "--controllers=restartschedule")
	ns := testutil.Namespace(t, suite.Client)
	c := ctx(t, 3*time.Minute)

	// Its RestartSchedule webhook judges schedules...
	wantInvalid(t, "@every 1s", suite.Client.Create(c, restartSchedule(ns, "fast", "@every 1s")), "spec.schedule")
	// ...and its controller restarts a Deployment.
	restartNow(t, ns)

	// The kinds it does not run are refused, saying why.
	refused := map[string]client.Object{
		"PodSet":     testutil.PodSet(ns, "ps", 1, map[string]string{"app": "ps"}, app),
		"SidecarSet": injectedSidecarSet(ns, "disabled", corev1.Container{Name: "proxy", Image: "registry.example/proxy:1"}),
		"WebServer": &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: deckhandv1alpha1.WebServerSpec{Image: "registry.example/web:1"}},
	}
	for kind, obj := range refused {
		err := suite.Client.Create(c, obj)
		if err == nil || !strings.Contains(err.Error(), "--controllers=restartschedule") {
			t.Errorf("creating a %s: %v, want a refusal naming --controllers=restartschedule", kind, err)
		}
	}

	// No pod webhook: its path is not served, and a pod is admitted as
	// it is (the pod webhook's failurePolicy is Ignore).
	code, body, err := postWebhook(t, inject.PodWebhookPath, strings.NewReader("{}"), 10*time.Second)
	if err != nil || code != http.StatusNotFound {
		t.Errorf("POST %s: %d %q %v, want 404", inject.PodWebhookPath, code, body, err)
	}
	pod := labelledPod(ns, "bare", "disabled")
	testutil.Create(c, t, suite.Client, pod)
	if len(pod.Spec.Containers) != 1 {
		t.Errorf("the pod was admitted with containers %v, want its own only", pod.Spec.Containers)
	}
	if n := metricSum(scrape(t, d), "controller_runtime_webhook_requests_total", fmt.Sprintf("webhook=%q", inject.PodWebhookPath)); n != 0 {
		t.Errorf("the manager counts %v pod webhook requests, want none", n)
	}

	// No pod informer: a full manager, whose SidecarSet and PodSet
	// controllers share one pod informer, adds a pod watch to those the
	// API server serves to the RestartSchedule-only one. This suite runs no
	// scheduler, controller manager or kubelet to watch pods meanwhile.
	without := podWatches(t)
	d.Stop()
	if err := suite.Deckhand.Restart(ctx(t, 2*time.Minute)); err != nil {
		t.Fatalf("restarting the suite's manager: %v", err)
	}
	testutil.Eventually(t, time.Minute, func(context.Context) (bool, error) {
		return podWatches(t) > without, nil
	}, "a full manager adds a pod watch to the %v pod watches served with the RestartSchedule-only manager", without)
}
