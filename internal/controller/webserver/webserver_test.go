package webserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/webserver"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	"github.com/deckhand-dev/deckhand/test/health"
)

// The seed's example: image nginx, port 80, replicas 2.
func TestSeedExample(t *testing.T) {
	ctx := ctx(t)
	ws, ns := createWebServer(t, "webapp", ptr.To[int32](2))

	d := waitDeployment(t, ns, "webapp", "2 ready replicas", func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas == 2 })
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		n, err := readyPods(ctx, ns, "webapp", "nginx")
		return n == 2, err
	}, "2 Ready nginx pods")
	if !metav1.IsControlledBy(d, ws) {
		t.Errorf("Deployment is not controlled by the WebServer: %v", d.OwnerReferences)
	}
	wantSel := map[string]string{"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": "webapp"}
	if fmt.Sprint(d.Spec.Selector.MatchLabels) != fmt.Sprint(wantSel) || d.Labels["app.kubernetes.io/managed-by"] != "deckhand" {
		t.Errorf("selector %v, labels %v", d.Spec.Selector.MatchLabels, d.Labels)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "nginx" || c.Ports[0].ContainerPort != 80 || c.ReadinessProbe == nil || c.ReadinessProbe.TCPSocket == nil || c.ReadinessProbe.TCPSocket.Port.IntValue() != 80 {
		t.Errorf("container %+v", c)
	}

	s, err := getService(ctx, ns, "webapp")
	if err != nil {
		t.Fatal(err)
	}
	if !metav1.IsControlledBy(s, ws) || s.Spec.Type != corev1.ServiceTypeClusterIP || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 80 ||
		s.Spec.Selector["app.kubernetes.io/instance"] != "webapp" || s.Spec.ClusterIP == "" {
		t.Errorf("Service %+v, owners %v", s.Spec, s.OwnerReferences)
	}

	got := waitWebServer(t, ns, "webapp", "Available with 2 ready replicas", func(ws *deckhandv1alpha1.WebServer) bool {
		return isCondition(ws, "Available", metav1.ConditionTrue, "") && ws.Status.ReadyReplicas == 2 &&
			isCondition(ws, "Progressing", metav1.ConditionFalse, webserver.ReasonRolloutComplete)
	})
	if got.Status.URL != "http://webapp."+ns+".svc:80" || got.Status.ObservedGeneration != got.Generation ||
		got.Status.Selector != "app.kubernetes.io/instance=webapp,app.kubernetes.io/name=webserver" ||
		got.Status.Replicas != 2 || got.Status.AvailableReplicas != 2 || !isCondition(got, "Degraded", metav1.ConditionFalse, "AsExpected") {
		t.Errorf("status %+v", got.Status)
	}

	// kubectl wait works on the condition, and the printer columns show.
	kubectl(t, "-n", ns, "wait", "--for=condition=Available", "webserver/webapp", "--timeout=60s")
	out := kubectl(t, "-n", ns, "get", "ws", "webapp")
	for _, col := range []string{"IMAGE", "READY", "URL", "AGE", "nginx", "http://webapp." + ns + ".svc:80"} {
		if !strings.Contains(out, col) {
			t.Errorf("kubectl get ws output lacks %q:\n%s", col, out)
		}
	}

	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		d, err := events(ctx, ns, "webapp", webserver.ReasonDeploymentCreated)
		if err != nil {
			return false, err
		}
		s, err := events(ctx, ns, "webapp", webserver.ReasonServiceCreated)
		return len(d) == 1 && len(s) == 1, err
	}, "one DeploymentCreated and one ServiceCreated event")
}

// Every spec field reaches the Deployment or Service, and the Service keeps
// its allocated cluster IP through all of it.
func TestSpecChangesPropagate(t *testing.T) {
	ctx := ctx(t)
	_, ns := createWebServer(t, "site", ptr.To[int32](1))
	svc := waitService(t, ns, "site", "created", func(*corev1.Service) bool { return true })
	clusterIP := svc.Spec.ClusterIP
	waitDeployment(t, ns, "site", "1 ready replica", func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas == 1 })

	update(t, ns, "site", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Image = "nginx:1.27" })
	waitDeployment(t, ns, "site", "image nginx:1.27 rolled out", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27" && d.Status.UpdatedReplicas == 1 && d.Status.ReadyReplicas == 1
	})

	update(t, ns, "site", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Port = 8080 })
	waitDeployment(t, ns, "site", "port 8080", func(d *appsv1.Deployment) bool {
		c := d.Spec.Template.Spec.Containers[0]
		return len(c.Ports) == 1 && c.Ports[0].ContainerPort == 8080 && c.ReadinessProbe.TCPSocket.Port.IntValue() == 8080
	})
	waitService(t, ns, "site", "port 8080", func(s *corev1.Service) bool { return len(s.Spec.Ports) == 1 && s.Spec.Ports[0].Port == 8080 })
	waitWebServer(t, ns, "site", "url on port 8080", func(ws *deckhandv1alpha1.WebServer) bool {
		return ws.Status.URL == "http://site."+ns+".svc:8080"
	})

	update(t, ns, "site", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Replicas = ptr.To[int32](3) })
	waitDeployment(t, ns, "site", "3 ready replicas", func(d *appsv1.Deployment) bool {
		return ptr.Deref(d.Spec.Replicas, 0) == 3 && d.Status.ReadyReplicas == 3
	})

	update(t, ns, "site", func(ws *deckhandv1alpha1.WebServer) {
		ws.Spec.Env = []corev1.EnvVar{{Name: "GREETING", Value: "hello"}, {Name: "MODE", Value: "fast"}}
		ws.Spec.PodAnnotations = map[string]string{"team": "web"}
		ws.Spec.PodLabels = map[string]string{"tier": "front"}
	})
	waitDeployment(t, ns, "site", "env, pod annotations and labels", func(d *appsv1.Deployment) bool {
		e := d.Spec.Template.Spec.Containers[0].Env
		return len(e) == 2 && e[0].Value == "hello" && e[1].Name == "MODE" &&
			d.Spec.Template.Annotations["team"] == "web" && d.Spec.Template.Labels["tier"] == "front"
	})

	// Removing things from the spec removes them from the Deployment.
	update(t, ns, "site", func(ws *deckhandv1alpha1.WebServer) {
		ws.Spec.Env = ws.Spec.Env[:1]
		ws.Spec.PodAnnotations = nil
	})
	waitDeployment(t, ns, "site", "MODE and the team annotation removed", func(d *appsv1.Deployment) bool {
		e := d.Spec.Template.Spec.Containers[0].Env
		_, has := d.Spec.Template.Annotations["team"]
		return len(e) == 1 && e[0].Name == "GREETING" && !has
	})

	update(t, ns, "site", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.ServiceType = corev1.ServiceTypeNodePort })
	svc = waitService(t, ns, "site", "type NodePort with a node port", func(s *corev1.Service) bool {
		return s.Spec.Type == corev1.ServiceTypeNodePort && s.Spec.Ports[0].NodePort != 0
	})
	if svc.Spec.ClusterIP != clusterIP {
		t.Errorf("cluster IP changed from %s to %s", clusterIP, svc.Spec.ClusterIP)
	}
	nodePort := svc.Spec.Ports[0].NodePort
	// A change elsewhere keeps the allocated node port.
	update(t, ns, "site", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Image = "nginx:1.28" })
	waitDeployment(t, ns, "site", "image nginx:1.28", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.28"
	})
	svc, err := getService(ctx, ns, "site")
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Ports[0].NodePort != nodePort || svc.Spec.ClusterIP != clusterIP {
		t.Errorf("allocated fields changed: node port %d -> %d, cluster IP %s -> %s", nodePort, svc.Spec.Ports[0].NodePort, clusterIP, svc.Spec.ClusterIP)
	}
	// Back to ClusterIP: the API server drops the node port it allocated.
	update(t, ns, "site", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.ServiceType = corev1.ServiceTypeClusterIP })
	svc = waitService(t, ns, "site", "type ClusterIP", func(s *corev1.Service) bool {
		return s.Spec.Type == corev1.ServiceTypeClusterIP && s.Spec.Ports[0].NodePort == 0
	})
	if svc.Spec.ClusterIP != clusterIP {
		t.Errorf("cluster IP changed from %s to %s", clusterIP, svc.Spec.ClusterIP)
	}
	waitWebServer(t, ns, "site", "Available, rollout complete, not degraded", func(ws *deckhandv1alpha1.WebServer) bool {
		return isCondition(ws, "Available", metav1.ConditionTrue, "") && isCondition(ws, "Progressing", metav1.ConditionFalse, webserver.ReasonRolloutComplete) &&
			isCondition(ws, "Degraded", metav1.ConditionFalse, "") && ws.Status.ReadyReplicas == 3
	})
}

// Fields Deckhand owns are restored after a hand edit; fields others own
// (template annotations from kubectl rollout restart, RestartSchedule and
// people, extra labels) survive; reconciles that find nothing to change send
// no apply at all.
func TestDriftAndForeignFields(t *testing.T) {
	ctx := ctx(t)
	_, ns := createWebServer(t, "web", ptr.To[int32](1))
	waitDeployment(t, ns, "web", "1 ready replica", func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas == 1 })
	waitWebServer(t, ns, "web", "Available", func(ws *deckhandv1alpha1.WebServer) bool {
		return isCondition(ws, "Available", metav1.ConditionTrue, "")
	})

	// Hand edit of the image (an Update, as kubectl edit sends): restored.
	editDeployment(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "httpd" })
	waitDeployment(t, ns, "web", "image restored to nginx", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx"
	})
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		ev, err := events(ctx, ns, "web", webserver.ReasonDeploymentUpdated)
		return len(ev) > 0 && strings.Contains(ev[0].Note, "restored"), err
	}, "a DeploymentUpdated event saying fields were restored")

	// Annotations others put on the pod template: by hand, by kubectl rollout
	// restart (the real kubectl) and by RestartSchedule (a merge patch under
	// Deckhand's field manager, as an Update, not an apply).
	dep, svcRef := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
	mergePatch(t, dep, `{"spec":{"template":{"metadata":{"annotations":{"example.com/owner":"alice"}}}}}`, client.FieldOwner("kubectl-annotate"))
	kubectl(t, "-n", ns, "rollout", "restart", "deployment/web")
	mergePatch(t, dep, `{"spec":{"template":{"metadata":{"annotations":{"apps.deckhand.dev/restarted-at":"2026-01-01T03:00:00Z"}}}}}`, client.FieldOwner(deckhandv1alpha1.FieldManager))
	// A label someone else adds to the Service.
	mergePatch(t, svcRef, `{"metadata":{"labels":{"example.com/exposed":"yes"}}}`, client.FieldOwner("kubectl-label"))
	svcApplies := applies.count("Service", ns, "web")
	svc, err := getService(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}

	// Each of those woke the controller; none may be undone. A spec change
	// and another hand edit then force applies of the Deployment.
	update(t, ns, "web", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Env = []corev1.EnvVar{{Name: "A", Value: "1"}} })
	waitDeployment(t, ns, "web", "env A applied", func(d *appsv1.Deployment) bool {
		return len(d.Spec.Template.Spec.Containers[0].Env) == 1
	})
	editDeployment(t, ns, "web", func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "caddy" })
	d := waitDeployment(t, ns, "web", "image restored again", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx"
	})
	a := d.Spec.Template.Annotations
	if a["example.com/owner"] != "alice" || a["kubectl.kubernetes.io/restartedAt"] == "" || a["apps.deckhand.dev/restarted-at"] == "" {
		t.Errorf("pod template annotations others own were removed: %v", a)
	}
	// The Service changed only by the foreign label: Deckhand sent it no apply.
	svc2, err := getService(ctx, ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	if svc2.Labels["example.com/exposed"] != "yes" || svc2.ResourceVersion != svc.ResourceVersion || svc2.Spec.ClusterIP != svc.Spec.ClusterIP {
		t.Errorf("Service changed: labels %v, resourceVersion %s -> %s", svc2.Labels, svc.ResourceVersion, svc2.ResourceVersion)
	}
	if n := applies.count("Service", ns, "web"); n != svcApplies {
		t.Errorf("%d Service applies for reconciles that had nothing to change", n-svcApplies)
	}

	// Steady state: touching the WebServer's labels (a reconcile for
	// unrelated reasons, filtered or not) and the Deployment's own labels
	// sends no apply.
	depApplies := applies.count("Deployment", ns, "web")
	mergePatch(t, dep, `{"metadata":{"labels":{"example.com/noise":"1"}}}`, client.FieldOwner("someone"))
	// Sync point: a hand edit of a field Deckhand owns on the Service.
	editByHand(t, svcRef, `{"spec":{"selector":{"app.kubernetes.io/instance":"other"}}}`)
	waitService(t, ns, "web", "selector restored", func(s *corev1.Service) bool {
		return s.Spec.Selector["app.kubernetes.io/instance"] == "web"
	})
	if n := applies.count("Deployment", ns, "web"); n != depApplies {
		t.Errorf("%d Deployment applies after a foreign label change", n-depApplies)
	}
}

// scale reads and writes the /scale subresource of obj.
func scale(t *testing.T, obj client.Object, replicas int32) {
	t.Helper()
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		sc := &autoscalingv1.Scale{}
		if err := env.Client.SubResource("scale").Get(ctx, obj, sc); err != nil {
			return false, err
		}
		sc.Spec.Replicas = replicas
		err := env.Client.SubResource("scale").Update(ctx, obj, client.WithSubResourceBody(sc))
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	}, "scaling %s to %d", obj.GetName(), replicas)
}

// Unset spec.replicas: start with 1, then whoever scales the Deployment
// (kubectl scale, an autoscaler) is not fought over.
func TestScaleWithReplicasUnset(t *testing.T) {
	ctx := ctx(t)
	_, ns := createWebServer(t, "free", nil)
	waitDeployment(t, ns, "free", "1 ready replica", func(d *appsv1.Deployment) bool {
		return ptr.Deref(d.Spec.Replicas, 0) == 1 && d.Status.ReadyReplicas == 1
	})

	kubectl(t, "-n", ns, "scale", "deployment/free", "--replicas=3")
	waitDeployment(t, ns, "free", "3 ready replicas", func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas == 3 })
	// A change that makes Deckhand apply the Deployment keeps the size.
	update(t, ns, "free", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Image = "nginx:1.27" })
	d := waitDeployment(t, ns, "free", "image nginx:1.27 rolled out", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27" && d.Status.UpdatedReplicas == 3 && d.Status.ReadyReplicas == 3
	})
	if r := ptr.Deref(d.Spec.Replicas, 0); r != 3 {
		t.Errorf("replicas = %d after an apply, want the 3 kubectl scale set", r)
	}
	// The status follows the Deployment, and /scale on the WebServer reads it.
	waitWebServer(t, ns, "free", "3 replicas in status", func(ws *deckhandv1alpha1.WebServer) bool {
		return ws.Status.Replicas == 3 && ws.Status.ReadyReplicas == 3
	})
	// Scaled again through the Deployment's /scale, as an autoscaler does.
	scale(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "free"}}, 2)
	update(t, ns, "free", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Env = []corev1.EnvVar{{Name: "X", Value: "y"}} })
	d = waitDeployment(t, ns, "free", "env applied", func(d *appsv1.Deployment) bool {
		return len(d.Spec.Template.Spec.Containers[0].Env) == 1
	})
	if r := ptr.Deref(d.Spec.Replicas, 0); r != 2 {
		t.Errorf("replicas = %d after an apply, want the 2 set through /scale", r)
	}
	// kubectl scale on the WebServer itself (a PATCH of its /scale) works
	// with spec.replicas unset too: it sets spec.replicas, which Deckhand
	// then owns and applies.
	kubectl(t, "-n", ns, "scale", "webserver/free", "--replicas=4")
	waitWebServer(t, ns, "free", "spec.replicas 4", func(ws *deckhandv1alpha1.WebServer) bool { return ptr.Deref(ws.Spec.Replicas, 0) == 4 })
	waitDeployment(t, ns, "free", "4 ready replicas", func(d *appsv1.Deployment) bool {
		return ptr.Deref(d.Spec.Replicas, 0) == 4 && d.Status.ReadyReplicas == 4
	})
	sc := &autoscalingv1.Scale{}
	if err := env.Client.SubResource("scale").Get(ctx, &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "free"}}, sc); err != nil {
		t.Fatal(err)
	}
	if sc.Spec.Replicas != 4 || sc.Status.Selector != "app.kubernetes.io/instance=free,app.kubernetes.io/name=webserver" {
		t.Errorf("WebServer /scale = %+v", sc)
	}
}

// Set spec.replicas: the WebServer's /scale is the way to scale, the
// Deployment's size follows it and is restored when changed there; unsetting
// spec.replicas again keeps the current size.
func TestScaleWithReplicasSet(t *testing.T) {
	_, ns := createWebServer(t, "fixed", ptr.To[int32](1))
	waitDeployment(t, ns, "fixed", "1 ready replica", func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas == 1 })

	kubectl(t, "-n", ns, "scale", "webserver/fixed", "--replicas=2")
	waitWebServer(t, ns, "fixed", "spec.replicas 2", func(ws *deckhandv1alpha1.WebServer) bool { return ptr.Deref(ws.Spec.Replicas, 0) == 2 })
	waitDeployment(t, ns, "fixed", "2 ready replicas", func(d *appsv1.Deployment) bool {
		return ptr.Deref(d.Spec.Replicas, 0) == 2 && d.Status.ReadyReplicas == 2
	})

	scale(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fixed"}}, 5)
	waitDeployment(t, ns, "fixed", "replicas restored to 2", func(d *appsv1.Deployment) bool {
		return ptr.Deref(d.Spec.Replicas, 0) == 2 && d.Status.ReadyReplicas == 2 && d.Status.Replicas == 2
	})

	// Unset spec.replicas: the Deployment keeps 2 (not the default 1), and is
	// from then on left to whoever scales it.
	mergePatch(t, &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fixed"}}, `{"spec":{"replicas":null}}`)
	d := waitDeployment(t, ns, "fixed", "replicas released", func(d *appsv1.Deployment) bool {
		_, owned := d.Annotations[deckhandv1alpha1.WebServerOwnsReplicasAnnotation]
		return !owned
	})
	if r := ptr.Deref(d.Spec.Replicas, 0); r != 2 {
		t.Errorf("replicas = %d after unsetting spec.replicas, want 2", r)
	}
	if managers := replicasManagers(d); fmt.Sprint(managers) != "["+deckhandv1alpha1.WebServerReplicasHandoffManager+"/Apply]" {
		t.Errorf("spec.replicas managed by %v, want only %s", managers, deckhandv1alpha1.WebServerReplicasHandoffManager)
	}
	kubectl(t, "-n", ns, "scale", "deployment/fixed", "--replicas=4")
	update(t, ns, "fixed", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Image = "nginx:1.27" })
	d = waitDeployment(t, ns, "fixed", "image nginx:1.27 rolled out on 4 replicas", func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27" && d.Status.UpdatedReplicas == 4 && d.Status.ReadyReplicas == 4
	})
	if r := ptr.Deref(d.Spec.Replicas, 0); r != 4 {
		t.Errorf("replicas = %d, want 4", r)
	}
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		ev, err := events(ctx, ns, "fixed", webserver.ReasonReplicasReleased)
		return len(ev) == 1, err
	}, "one ReplicasReleased event")
}

// replicasManagers are the field managers of d's spec.replicas, each as
// manager/operation.
func replicasManagers(d *appsv1.Deployment) []string {
	var managers []string
	for _, f := range d.ManagedFields {
		var fields map[string]map[string]any
		if f.FieldsV1 == nil || json.Unmarshal(f.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		if _, ok := fields["f:spec"]["f:replicas"]; ok {
			managers = append(managers, f.Manager+"/"+string(f.Operation))
		}
	}
	return managers
}

// Deleting a WebServer lets the garbage collector remove its Deployment and
// Service (no finalizer involved).
func TestDeleteGarbageCollects(t *testing.T) {
	ctx := ctx(t)
	ws, ns := createWebServer(t, "gone", ptr.To[int32](1))
	waitDeployment(t, ns, "gone", "created", func(*appsv1.Deployment) bool { return true })
	waitService(t, ns, "gone", "created", func(*corev1.Service) bool { return true })
	if len(ws.Finalizers) != 0 {
		t.Errorf("finalizers %v", ws.Finalizers)
	}
	if err := env.Client.Delete(ctx, ws); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		_, errD := getDeployment(ctx, ns, "gone")
		_, errS := getService(ctx, ns, "gone")
		return apierrors.IsNotFound(errD) && apierrors.IsNotFound(errS), nil
	}, "Deployment and Service garbage collected")
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		n, err := readyPods(ctx, ns, "gone", "")
		return n == 0, err
	}, "pods gone")
}

// A Deployment of the WebServer's name that it does not own is reported and
// left untouched; once it is gone, the WebServer creates its own.
func TestNameConflict(t *testing.T) {
	ctx, ns := ctx(t), env.Namespace(t)
	sel := map[string]string{"app": "theirs"}
	theirs := testutil.Deployment(ns, "taken", 1, sel, corev1.Container{Name: "app", Image: "httpd"})
	theirs.Labels = sel
	if err := env.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	waitDeployment(t, ns, "taken", "ready", func(d *appsv1.Deployment) bool { return d.Status.ReadyReplicas == 1 })
	before, err := getDeployment(ctx, ns, "taken")
	if err != nil {
		t.Fatal(err)
	}

	if err := env.Client.Create(ctx, newWebServer(ns, "taken", ptr.To[int32](2))); err != nil {
		t.Fatal(err)
	}
	ws := waitWebServer(t, ns, "taken", "Degraded with NameConflict", func(ws *deckhandv1alpha1.WebServer) bool {
		return isCondition(ws, "Degraded", metav1.ConditionTrue, webserver.ReasonNameConflict) &&
			isCondition(ws, "Available", metav1.ConditionFalse, webserver.ReasonNameConflict)
	})
	if msg := condition(ws, "Degraded").Message; !strings.Contains(msg, "Deployment "+ns+"/taken") {
		t.Errorf("Degraded message does not name the conflict: %q", msg)
	}
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		ev, err := events(ctx, ns, "taken", webserver.ReasonNameConflict)
		return len(ev) == 1 && ev[0].Type == corev1.EventTypeWarning, err
	}, "a NameConflict warning event")

	// Several reconciles later (the Service was created meanwhile, which woke
	// the controller again), their Deployment is exactly as it was.
	waitService(t, ns, "taken", "created", func(*corev1.Service) bool { return true })
	update(t, ns, "taken", func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Image = "nginx:1.27" })
	waitWebServer(t, ns, "taken", "generation observed", func(ws *deckhandv1alpha1.WebServer) bool {
		return ws.Status.ObservedGeneration == ws.Generation && isCondition(ws, "Degraded", metav1.ConditionTrue, webserver.ReasonNameConflict)
	})
	after, err := getDeployment(ctx, ns, "taken")
	if err != nil {
		t.Fatal(err)
	}
	if after.Generation != before.Generation || len(after.OwnerReferences) != 0 ||
		after.Spec.Template.Spec.Containers[0].Image != "httpd" || fmt.Sprint(after.Labels) != fmt.Sprint(before.Labels) ||
		fmt.Sprint(after.Annotations) != fmt.Sprint(before.Annotations) || ptr.Deref(after.Spec.Replicas, 0) != 1 {
		t.Errorf("the conflicting Deployment was changed: %+v", after)
	}
	for _, f := range after.ManagedFields {
		if strings.HasPrefix(f.Manager, "deckhand") {
			t.Errorf("Deckhand manages fields of the conflicting Deployment: %+v", f)
		}
	}
	if n := applies.count("Deployment", ns, "taken"); n != 0 {
		t.Errorf("%d applies to the conflicting Deployment", n)
	}

	// The conflict clears by itself once their Deployment is gone.
	if err := env.Client.Delete(ctx, before, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	waitWebServer(t, ns, "taken", "Available, not Degraded", func(ws *deckhandv1alpha1.WebServer) bool {
		return isCondition(ws, "Degraded", metav1.ConditionFalse, "") && isCondition(ws, "Available", metav1.ConditionTrue, "") && ws.Status.ReadyReplicas == 2
	})
	d, err := getDeployment(ctx, ns, "taken")
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Spec.Containers[0].Image != "nginx:1.27" || d.UID == before.UID {
		t.Errorf("the WebServer's own Deployment was not created: %+v", d.Spec.Template.Spec.Containers)
	}
}

// TestSummaryThroughARollout follows a WebServer through the states tools
// read from its summary conditions: Ready once rolled out, Reconciling
// while a rollout of its Deployment is under way (held here by pausing the
// Deployment, as kubectl rollout pause does), Ready again when it is done.
func TestSummaryThroughARollout(t *testing.T) {
	ws, ns := createWebServer(t, "summary", nil)
	health.Wait(t, env.Client, ws, timeout, health.IsReady(webserver.ReasonRolloutComplete))

	editDeployment(t, ns, ws.Name, func(d *appsv1.Deployment) { d.Spec.Paused = true })
	update(t, ns, ws.Name, func(ws *deckhandv1alpha1.WebServer) { ws.Spec.Image = "nginx:1.27" })
	health.Wait(t, env.Client, ws, timeout, health.IsReconciling(webserver.ReasonRollingOut))

	editDeployment(t, ns, ws.Name, func(d *appsv1.Deployment) { d.Spec.Paused = false })
	health.Wait(t, env.Client, ws, timeout, health.IsReady(webserver.ReasonRolloutComplete))
}

// TestSummaryStalled gives WebServers what keeps them from their spec: a
// Service of the same name they do not own (NameConflict), and a
// ResourceQuota that refuses every pod, so the Deployment cannot become
// available and reports ReplicaFailure. Each is stalled (kstatus Failed, Argo
// CD Degraded) and Ready once the obstacle is gone.
func TestSummaryStalled(t *testing.T) {
	for _, tc := range []struct {
		reason string
		// obstacle creates what stands in the way.
		obstacle func(t *testing.T, ns string) client.Object
		// lift: remove the obstacle and wait for Ready. Not for the quota:
		// the ReplicaSet controller backs off while it refuses pods.
		lift bool
	}{
		{webserver.ReasonNameConflict, func(t *testing.T, ns string) client.Object {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blocked"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}}
			if err := env.Client.Create(ctx(t), svc); err != nil {
				t.Fatal(err)
			}
			return svc
		}, true},
		{webserver.ReasonReplicaFailure, func(t *testing.T, ns string) client.Object {
			return health.RefusePods(t, env.Client, ns)
		}, false},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			c, ns := ctx(t), env.Namespace(t)
			obstacle := tc.obstacle(t, ns)
			ws := newWebServer(ns, "blocked", nil)
			if err := env.Client.Create(c, ws); err != nil {
				t.Fatal(err)
			}
			health.Wait(t, env.Client, ws, timeout, health.IsStalled(tc.reason))
			if tc.lift {
				if err := env.Client.Delete(c, obstacle); err != nil {
					t.Fatal(err)
				}
				health.Wait(t, env.Client, ws, timeout, health.IsReady(webserver.ReasonRolloutComplete))
			}
		})
	}
}

// Invalid WebServers are refused by the real API server (schema, CEL, and
// the webhook), with messages that name the field.
func TestValidation(t *testing.T) {
	ctx, ns := ctx(t), env.Namespace(t)
	cases := map[string]struct {
		name   string
		mutate func(s *deckhandv1alpha1.WebServerSpec)
		field  string
	}{
		"empty image":             {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Image = "" }, field: "spec.image"},
		"upper-case image":        {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Image = "Nginx" }, field: "spec.image"},
		"image with a space":      {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Image = "nginx :1.27" }, field: "spec.image"},
		"image with two tags":     {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Image = "nginx:1.27:latest" }, field: "spec.image"},
		"image with a bad digest": {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Image = "nginx@sha256:abc" }, field: "spec.image"},
		"port below 1":            {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Port = -1 }, field: "spec.port"},
		"port 65536":              {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Port = 65536 }, field: "spec.port"},
		"negative replicas":       {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Replicas = ptr.To[int32](-1) }, field: "spec.replicas"},
		"unknown service type":    {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.ServiceType = "ExternalName" }, field: "spec.serviceType"},
		"env name with =":         {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Env = []corev1.EnvVar{{Name: "A=B", Value: "x"}} }, field: "spec.env[0].name"},
		"empty env name":          {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Env = []corev1.EnvVar{{Name: "", Value: "x"}} }, field: "spec.env[0].name"},
		"duplicate env name":      {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.Env = []corev1.EnvVar{{Name: "A"}, {Name: "A"}} }, field: "spec.env[1]"},
		"env value and valueFrom": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.Env = []corev1.EnvVar{{Name: "A", Value: "x", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		}, field: "spec.env[0].valueFrom"},
		"selector label in podLabels": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.PodLabels = map[string]string{"app.kubernetes.io/instance": "x"}
		}, field: "spec.podLabels"},
		"invalid pod label value": {mutate: func(s *deckhandv1alpha1.WebServerSpec) { s.PodLabels = map[string]string{"tier": "not valid!"} }, field: "spec.podLabels"},
		"invalid pod annotation key": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.PodAnnotations = map[string]string{"no spaces/allowed here": "x"}
		}, field: "spec.podAnnotations"},
		"requests above limits": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resourceMust("2")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resourceMust("1")},
			}
		}, field: "spec.resources.requests[cpu]"},
		"probe with two handlers": {mutate: func(s *deckhandv1alpha1.WebServerSpec) {
			s.ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
				TCPSocket: &corev1.TCPSocketAction{Port: intOrString(80)},
				Exec:      &corev1.ExecAction{Command: []string{"true"}},
			}}
		}, field: "spec.readinessProbe"},
		"name not a DNS-1035 label": {name: "1site", mutate: func(*deckhandv1alpha1.WebServerSpec) {}, field: "metadata.name"},
	}
	for desc, tc := range cases {
		t.Run(desc, func(t *testing.T) {
			name := tc.name
			if name == "" {
				name = "invalid"
			}
			ws := newWebServer(ns, name, nil)
			tc.mutate(&ws.Spec)
			err := env.Client.Create(ctx, ws)
			if err == nil {
				_ = env.Client.Delete(ctx, ws)
				t.Fatalf("created an invalid WebServer")
			}
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}

	// A valid one gets its defaults; an update to an invalid spec is refused.
	ws := &deckhandv1alpha1.WebServer{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "valid"},
		Spec: deckhandv1alpha1.WebServerSpec{
			Image: "registry.example.com:5000/team/site:v1.2@sha256:" + strings.Repeat("a", 64),
			Env:   []corev1.EnvVar{{Name: "my.var-1", Value: "x"}},
		},
	}
	if err := env.Client.Create(ctx, ws); err != nil {
		t.Fatalf("creating a valid WebServer: %v", err)
	}
	if ws.Spec.Port != 80 || ws.Spec.ServiceType != corev1.ServiceTypeClusterIP || ws.Spec.Replicas != nil {
		t.Errorf("defaults: port %d, serviceType %q, replicas %v", ws.Spec.Port, ws.Spec.ServiceType, ws.Spec.Replicas)
	}
	ws.Spec.Image = "UPPER"
	if err := env.Client.Update(ctx, ws); err == nil || !strings.Contains(err.Error(), "spec.image") {
		t.Errorf("update to an invalid image: %v", err)
	}
}

func resourceMust(s string) resource.Quantity { return resource.MustParse(s) }

func intOrString(i int) intstr.IntOrString { return intstr.FromInt(i) }

// The sample in config/samples works: both WebServers become Available.
func TestSample(t *testing.T) {
	ctx, ns := ctx(t), env.Namespace(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "config", "samples", "apps_v1alpha1_webserver.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		ws := &deckhandv1alpha1.WebServer{}
		if err := yaml.UnmarshalStrict([]byte(doc), ws); err != nil {
			t.Fatalf("sample: %v", err)
		}
		ws.Namespace = ns
		if err := env.Client.Create(ctx, ws); err != nil {
			t.Fatalf("creating sample %s: %v", ws.Name, err)
		}
		names = append(names, ws.Name)
	}
	if len(names) != 2 {
		t.Fatalf("sample has %d WebServers, want 2", len(names))
	}
	for _, name := range names {
		waitWebServer(t, ns, name, "Available", func(ws *deckhandv1alpha1.WebServer) bool {
			return isCondition(ws, "Available", metav1.ConditionTrue, "") && isCondition(ws, "Degraded", metav1.ConditionFalse, "")
		})
	}
}
