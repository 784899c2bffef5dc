package helm

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// installNamespace is not deckhand-system, so that everything the chart
// derives from its namespace is exercised.
const (
	installNamespace = "deckhand-helm"
	managerSA        = "deckhand-controller-manager"
)

// TestInstall installs the chart into a local cluster (API server, etcd,
// controller-manager, which lifts a new node's not-ready taint, scheduler and
// one kwok node, on which pods become Ready) and runs the
// manager on this host with the chart's ServiceAccount, namespace and
// webhook configurations: it injects a SidecarSet's container, makes a
// PodSet Ready, and is refused nothing. helm uninstall then removes
// everything but the CRDs.
func TestInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a local cluster")
	}
	ctx := testutil.Context(t, 8*time.Minute)
	work := t.TempDir()
	bin, err := localcluster.BuildDeckhand(ctx, testutil.RepoRoot(t), work)
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := localcluster.Start(ctx, localcluster.Full(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	defer func() {
		if t.Failed() {
			t.Logf("component logs:\n%s", cluster.Logs(60))
		}
	}()
	c, err := client.New(cluster.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := "--kubeconfig=" + cluster.KubeconfigPath

	if out, err := runHelm(t, "install", "deckhand", chartDir(t), kubeconfig,
		"--namespace", installNamespace, "--create-namespace"); err != nil {
		t.Fatal(err)
	} else {
		t.Log(out)
	}

	// The manager runs on this host: the webhooks call it there, with the
	// ServiceAccount's token the chart's RBAC applies to.
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.PointWebhooksAt(ctx, "https://localhost:"+strconv.Itoa(port), "helm-test"); err != nil {
		t.Fatal(err)
	}
	saKubeconfig := filepath.Join(work, "deckhand-sa.kubeconfig")
	if _, err := cluster.WriteServiceAccountKubeconfig(ctx, saKubeconfig, installNamespace, managerSA, time.Hour); err != nil {
		t.Fatal(err)
	}
	deckhand, err := cluster.StartDeckhand(ctx, localcluster.DeckhandOptions{
		Binary: bin, Kubeconfig: saKubeconfig, WebhookPort: port,
		CertDir: filepath.Join(work, "webhook-certs"),
		Args: []string{
			"--leader-elect=true",
			"--leader-election-namespace=" + installNamespace,
			"--cert-management=self",
			"--cert-secret-namespace=" + installNamespace,
			"--cert-extra-dns-names=localhost",
		},
		Env: []string{"POD_NAMESPACE=" + installNamespace},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("manager log:\n%s", deckhand.Logs(80))
		}
	}()
	t.Cleanup(deckhand.Stop)

	// A namespace the SidecarSet selects by label.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "helm-apps", Labels: map[string]string{"sidecars": "on"}}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": "web"}
	ss := &deckhandv1alpha1.SidecarSet{
		ObjectMeta: metav1.ObjectMeta{Name: "helm-log-shipper"},
		Spec: deckhandv1alpha1.SidecarSetSpec{
			Selector:          &metav1.LabelSelector{MatchLabels: labels},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"sidecars": "on"}},
			Containers: []deckhandv1alpha1.SidecarContainer{{
				Container: corev1.Container{Name: "log-shipper", Image: "registry.example/log-shipper:1"},
			}},
		},
	}
	if err := c.Create(ctx, ss); err != nil {
		t.Fatal(err)
	}
	// The webhook injects once the manager has seen the SidecarSet; a pod
	// created before that is deleted and created again.
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "web-", Namespace: ns.Name, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}
		if err := c.Create(ctx, pod); err != nil {
			return false, err
		}
		for _, ctr := range pod.Spec.Containers {
			if ctr.Name == "log-shipper" {
				return true, nil
			}
		}
		return false, c.Delete(ctx, pod)
	}, "a pod in namespace %s gets the SidecarSet's container", ns.Name)

	ps := testutil.PodSet(ns.Name, "helm-podset", 1, map[string]string{"app": "podset"},
		corev1.Container{Name: "app", Image: "registry.k8s.io/pause:3.10"})
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("PodSet status: %+v", ps.Status)
			var pods corev1.PodList
			_ = c.List(context.Background(), &pods, client.InNamespace(ns.Name))
			for _, p := range pods.Items {
				t.Logf("pod %s: node %q phase %s conditions %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions)
			}
		}
	}()
	testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(ps), ps); err != nil {
			return false, err
		}
		return apimeta.IsStatusConditionTrue(ps.Status.Conditions, deckhandv1alpha1.ReadyCondition), nil
	}, "PodSet %s/%s Ready", ps.Namespace, ps.Name)

	if lines := cluster.ManagerRefusals(); len(lines) > 0 {
		t.Errorf("the manager was refused %d API request(s) under the chart's ServiceAccount:\n%s",
			len(lines), strings.Join(lines, "\n"))
	}
	deckhand.Stop()

	// helm uninstall removes what the chart installed; Helm never deletes
	// the CRDs of crds/ (nor so the users' objects).
	if _, err := runHelm(t, "uninstall", "deckhand", kubeconfig, "--namespace", installNamespace); err != nil {
		t.Fatal(err)
	}
	cs := cluster.Clientset()
	gone := map[string]func(ctx context.Context) error{
		"ServiceAccount": func(ctx context.Context) error {
			_, err := cs.CoreV1().ServiceAccounts(installNamespace).Get(ctx, managerSA, metav1.GetOptions{})
			return err
		},
		"Deployment": func(ctx context.Context) error {
			_, err := cs.AppsV1().Deployments(installNamespace).Get(ctx, "deckhand-controller-manager", metav1.GetOptions{})
			return err
		},
		"ClusterRole": func(ctx context.Context) error {
			_, err := cs.RbacV1().ClusterRoles().Get(ctx, "deckhand-manager-role", metav1.GetOptions{})
			return err
		},
		"MutatingWebhookConfiguration": func(ctx context.Context) error {
			_, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, localcluster.MutatingWebhookConfiguration, metav1.GetOptions{})
			return err
		},
		"ValidatingWebhookConfiguration": func(ctx context.Context) error {
			_, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, localcluster.ValidatingWebhookConfiguration, metav1.GetOptions{})
			return err
		},
	}
	for kind, get := range gone {
		if err := get(ctx); !apierrors.IsNotFound(err) {
			t.Errorf("%s after helm uninstall: %v, want NotFound", kind, err)
		}
	}
	var kept deckhandv1alpha1.PodSetList
	if err := c.List(ctx, &kept, client.InNamespace(ns.Name)); err != nil {
		t.Errorf("the PodSet CRD after helm uninstall: %v", err)
	}
}
