package webserver_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/webserver"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	webserverwebhook "github.com/deckhand-dev/deckhand/internal/webhook/webserver"
)

var (
	env     *testenv.Env
	applies = &applyCounter{n: map[string]int{}}
)

// applyCounter wraps the manager's client and counts the server-side applies
// the controller sends, per "Kind ns/name", so that tests can prove that
// reconciles which find nothing to change send no write at all.
type applyCounter struct {
	client.Client
	mu sync.Mutex
	n  map[string]int
}

func (c *applyCounter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	key := "?"
	switch o := obj.(type) {
	case *appsv1ac.DeploymentApplyConfiguration:
		key = "Deployment " + *o.Namespace + "/" + *o.Name
	case *corev1ac.ServiceApplyConfiguration:
		key = "Service " + *o.Namespace + "/" + *o.Name
	}
	c.mu.Lock()
	c.n[key]++
	c.mu.Unlock()
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *applyCounter) count(kind, ns, name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[kind+" "+ns+"/"+name]
}

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Full:       true,
		GatewayAPI: true,
		Setup: func(mgr ctrl.Manager) error {
			applies.Client = mgr.GetClient()
			if err := (&webserver.Reconciler{Client: applies}).SetupWithManager(mgr); err != nil {
				return err
			}
			return webserverwebhook.SetupWebhookWithManager(mgr)
		},
	}))
}

const timeout = 90 * time.Second

// ctx bounds a test's requests by twice the longest wait.
func ctx(t *testing.T) context.Context { return testutil.Context(t, 2*timeout) }

func newWebServer(ns, name string, replicas *int32) *deckhandv1alpha1.WebServer {
	return &deckhandv1alpha1.WebServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       deckhandv1alpha1.WebServerSpec{Image: "nginx", Port: 80, Replicas: replicas},
	}
}

// createWebServer creates, in a namespace of the test's own, the WebServer
// newWebServer describes, and returns it and the namespace.
func createWebServer(t *testing.T, name string, replicas *int32) (*deckhandv1alpha1.WebServer, string) {
	t.Helper()
	ns := env.Namespace(t)
	ws := newWebServer(ns, name, replicas)
	if err := env.Client.Create(ctx(t), ws); err != nil {
		t.Fatal(err)
	}
	return ws, ns
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func getDeployment(ctx context.Context, ns, name string) (*appsv1.Deployment, error) {
	d := &appsv1.Deployment{}
	return d, env.Client.Get(ctx, key(ns, name), d)
}

func getService(ctx context.Context, ns, name string) (*corev1.Service, error) {
	s := &corev1.Service{}
	return s, env.Client.Get(ctx, key(ns, name), s)
}

// waitDeployment waits until the Deployment satisfies cond.
func waitDeployment(t *testing.T, ns, name, what string, cond func(d *appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	return waitFor(t, "Deployment", ns, name, what, cond)
}

// waitService waits until the Service satisfies cond.
func waitService(t *testing.T, ns, name, what string, cond func(s *corev1.Service) bool) *corev1.Service {
	t.Helper()
	return waitFor(t, "Service", ns, name, what, cond)
}

// waitWebServer waits until the WebServer satisfies cond.
func waitWebServer(t *testing.T, ns, name, what string, cond func(ws *deckhandv1alpha1.WebServer) bool) *deckhandv1alpha1.WebServer {
	t.Helper()
	return waitFor(t, "WebServer", ns, name, what, cond)
}

// waitFor waits until the object ns/name of kind satisfies cond, reading it
// into a new object on every try so that no field outlives a read.
func waitFor[T any, P interface {
	*T
	client.Object
}](t *testing.T, kind, ns, name, what string, cond func(P) bool) P {
	t.Helper()
	var obj P
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		obj = new(T)
		err := env.Client.Get(ctx, key(ns, name), obj)
		return err == nil && cond(obj), err
	}, "%s %s/%s: %s", kind, ns, name, what)
	return obj
}

func condition(ws *deckhandv1alpha1.WebServer, t string) *metav1.Condition {
	return meta.FindStatusCondition(ws.Status.Conditions, t)
}

func isCondition(ws *deckhandv1alpha1.WebServer, t string, s metav1.ConditionStatus, reason string) bool {
	c := condition(ws, t)
	return c != nil && c.Status == s && (reason == "" || c.Reason == reason) && c.ObservedGeneration == ws.Generation
}

// readyPods counts the Ready pods of a WebServer (made Running and Ready by
// kwok after kube-scheduler bound them).
func readyPods(ctx context.Context, ns, name string, image string) (int, error) {
	pods := &corev1.PodList{}
	if err := env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{
		deckhandv1alpha1.WebServerNameLabel: deckhandv1alpha1.WebServerNameLabelValue, deckhandv1alpha1.WebServerInstanceLabel: name,
	}); err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || (image != "" && p.Spec.Containers[0].Image != image) {
			continue
		}
		if podutil.IsPodReady(&p) {
			n++
		}
	}
	return n, nil
}

// update re-reads the WebServer and applies change to it, retrying on conflicts.
func update(t *testing.T, ns, name string, change func(ws *deckhandv1alpha1.WebServer)) {
	t.Helper()
	testutil.Update(t, env.Client, timeout, &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, change)
}

// editDeployment changes the Deployment with an Update under the field
// manager kubectl edit uses, retrying on conflicts.
func editDeployment(t *testing.T, ns, name string, change func(d *appsv1.Deployment)) {
	t.Helper()
	testutil.Update(t, env.Client, timeout, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, change, client.FieldOwner("kubectl-edit"))
}

// mergePatch sends patch as a JSON merge patch of obj, the way another
// client edits it (under the field manager opts name, if any).
func mergePatch(t *testing.T, obj client.Object, patch string, opts ...client.PatchOption) {
	t.Helper()
	if err := env.Client.Patch(ctx(t), obj, client.RawPatch(types.MergePatchType, []byte(patch)), opts...); err != nil {
		t.Fatal(err)
	}
}

// editByHand merge-patches obj as `kubectl edit` does, under a field
// manager of its own.
func editByHand(t *testing.T, obj client.Object, patch string) {
	t.Helper()
	mergePatch(t, obj, patch, client.FieldOwner("kubectl-edit"))
}

// kubectl runs the real kubectl against the test cluster.
func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return testutil.Kubectl(t, env.Cluster.BinDir(), env.Cluster.KubeconfigPath, args...)
}

// events lists the Events about a WebServer with the given reason.
func events(ctx context.Context, ns, name, reason string) ([]eventsv1.Event, error) {
	list := &eventsv1.EventList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Kind == "WebServer" && e.Regarding.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out, nil
}
