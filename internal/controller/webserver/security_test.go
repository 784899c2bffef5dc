package webserver_test

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// restrictedNamespace returns a namespace of the test's own in which the API
// server's PodSecurity admission enforces the restricted standard.
func restrictedNamespace(t *testing.T) string {
	t.Helper()
	ns := env.Namespace(t)
	obj := &corev1.Namespace{}
	if err := env.Client.Get(ctx(t), key("", ns), obj); err != nil {
		t.Fatal(err)
	}
	if obj.Labels == nil {
		obj.Labels = map[string]string{}
	}
	obj.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if err := env.Client.Update(ctx(t), obj); err != nil {
		t.Fatal(err)
	}
	return ns
}

// waitReadyPods waits until the WebServer has n Ready pods.
func waitReadyPods(t *testing.T, ns, name string, n int, why string) {
	t.Helper()
	testutil.Eventually(t, timeout, func(ctx context.Context) (bool, error) {
		got, err := readyPods(ctx, ns, name, "")
		return got == n, err
	}, "%d Ready pods %s", n, why)
}

// A WebServer's pods meet the restricted Pod Security Standard as they
// come: in a namespace that enforces it, they are admitted and Ready.
func TestRestrictedNamespaceAdmitsTheDefaultPods(t *testing.T) {
	ns := restrictedNamespace(t)
	ws := newWebServer(ns, "site", ptr.To[int32](2))
	testutil.Create(ctx(t), t, env.Client, ws)
	waitReadyPods(t, ns, "site", 2, "in a restricted namespace")

	d, err := getDeployment(ctx(t), ns, "site")
	if err != nil {
		t.Fatal(err)
	}
	spec := d.Spec.Template.Spec
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("automountServiceAccountToken %v, want false", spec.AutomountServiceAccountToken)
	}
	c := spec.Containers[0]
	if c.SecurityContext == nil || c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem ||
		len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/tmp" {
		t.Errorf("container: security context %+v, mounts %+v; want a read-only root and /tmp writable", c.SecurityContext, c.VolumeMounts)
	}

	// The seed's short names reach WebServers too.
	for _, short := range []string{"mws", "myweb", "ws", "web"} {
		if out := kubectl(t, "-n", ns, "get", short); !strings.Contains(out, "site") {
			t.Errorf("kubectl get %s does not list the WebServer:\n%s", short, out)
		}
	}
}

// spec.securityContext replaces the default: an image that needs root runs
// where the namespace allows it, and the restricted standard refuses it,
// which the Deployment reports.
func TestSecurityContextOverride(t *testing.T) {
	root := &corev1.SecurityContext{RunAsNonRoot: ptr.To(false), AllowPrivilegeEscalation: ptr.To(true)}

	ns := restrictedNamespace(t)
	ws := newWebServer(ns, "root", ptr.To[int32](1))
	ws.Spec.SecurityContext = root
	testutil.Create(ctx(t), t, env.Client, ws)
	waitDeployment(t, ns, "root", "a ReplicaFailure naming PodSecurity", func(d *appsv1.Deployment) bool {
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue && strings.Contains(c.Message, "PodSecurity") {
				return true
			}
		}
		return false
	})

	open := env.Namespace(t)
	ws = newWebServer(open, "root", ptr.To[int32](1))
	ws.Spec.SecurityContext = root
	ws.Spec.PodSecurityContext = &corev1.PodSecurityContext{}
	testutil.Create(ctx(t), t, env.Client, ws)
	waitReadyPods(t, open, "root", 1, "running as root where the namespace allows it")
	d, err := getDeployment(ctx(t), open, "root")
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.SecurityContext.ReadOnlyRootFilesystem != nil || len(c.VolumeMounts) != 0 || c.SecurityContext.Capabilities != nil {
		t.Errorf("the override is not used as written: %+v, mounts %+v", c.SecurityContext, c.VolumeMounts)
	}
}
