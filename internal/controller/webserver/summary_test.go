package webserver_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/webserver"
	"github.com/deckhand-dev/deckhand/test/health"
)

// TestSummaryThroughARollout follows a WebServer through the states tools
// read from its summary conditions: Ready once rolled out, Reconciling
// while a rollout of its Deployment is under way (held here by pausing the
// Deployment, as kubectl rollout pause does), Ready again when it is done.
func TestSummaryThroughARollout(t *testing.T) {
	c, ns := ctx(t), env.Namespace(t)
	ws := newWebServer(ns, "summary", nil)
	if err := env.Client.Create(c, ws); err != nil {
		t.Fatal(err)
	}
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
		reason   string
		obstacle func(ns string) client.Object
		// lift: remove the obstacle and wait for Ready. Not for the quota:
		// the ReplicaSet controller backs off while it refuses pods.
		lift bool
	}{
		{webserver.ReasonNameConflict, func(ns string) client.Object {
			return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "blocked"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}}
		}, true},
		{webserver.ReasonReplicaFailure, func(ns string) client.Object { return health.RefusePods(ns) }, false},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			c, ns := ctx(t), env.Namespace(t)
			obstacle := tc.obstacle(ns)
			ws := newWebServer(ns, "blocked", nil)
			for _, obj := range []client.Object{obstacle, ws} {
				if err := env.Client.Create(c, obj); err != nil {
					t.Fatal(err)
				}
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
