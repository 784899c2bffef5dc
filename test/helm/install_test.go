package helm

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// TestInstall installs the chart into a local cluster (startCluster) and
// runs the manager on this host with the chart's ServiceAccount, namespace and
// webhook configurations: it injects a SidecarSet's container, makes a
// PodSet Ready, and is refused nothing. helm uninstall then removes
// everything but the CRDs.
func TestInstall(t *testing.T) {
	env := startCluster(t, 8*time.Minute)
	ctx, cluster, c, kubeconfig := env.ctx, env.cluster, env.client, env.kubeconfig

	if out, err := runHelm(t, "install", "deckhand", chartDir(t), kubeconfig,
		"--namespace", installNamespace, "--create-namespace"); err != nil {
		t.Fatal(err)
	} else {
		t.Log(out)
	}
	deckhand := env.startManager(t, env.binary)

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

	// helm uninstall removes what the chart installed but the CRDs, which
	// crds.keep (the default) keeps, and so the users' objects.
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

// installEnv is a local cluster (API server, etcd, controller-manager,
// which lifts a new node's not-ready taint, scheduler and one kwok node, on
// which pods become Ready) and the manager binary built for it.
type installEnv struct {
	ctx        context.Context
	cluster    *localcluster.Cluster
	client     client.Client
	kubeconfig string // helm's --kubeconfig flag
	work       string
	binary     string
}

func startCluster(t *testing.T, timeout time.Duration) *installEnv {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a local cluster")
	}
	env := &installEnv{ctx: testutil.Context(t, timeout), work: t.TempDir()}
	var err error
	if env.binary, err = localcluster.BuildDeckhand(env.ctx, testutil.RepoRoot(t), env.work); err != nil {
		t.Fatal(err)
	}
	if env.cluster, err = localcluster.Start(env.ctx, localcluster.Full(1)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.cluster.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("component logs:\n%s", env.cluster.Logs(60))
		}
	})
	if env.client, err = client.New(env.cluster.Config, client.Options{Scheme: testenv.Scheme()}); err != nil {
		t.Fatal(err)
	}
	env.kubeconfig = "--kubeconfig=" + env.cluster.KubeconfigPath
	return env
}

// startManager runs the manager binary on this host with the chart's
// ServiceAccount, namespace and webhook configurations, which it points at
// the manager (nothing here can route to a Service).
func (env *installEnv) startManager(t *testing.T, binary string) *localcluster.DeckhandProcess {
	t.Helper()
	port, err := localcluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := env.cluster.PointWebhooksAt(env.ctx, "https://localhost:"+strconv.Itoa(port), "helm-test"); err != nil {
		t.Fatal(err)
	}
	saKubeconfig := filepath.Join(env.work, "deckhand-sa.kubeconfig")
	if _, err := env.cluster.WriteServiceAccountKubeconfig(env.ctx, saKubeconfig, installNamespace, managerSA, time.Hour); err != nil {
		t.Fatal(err)
	}
	deckhand, err := env.cluster.StartDeckhand(env.ctx, localcluster.DeckhandOptions{
		Binary: binary, Kubeconfig: saKubeconfig, WebhookPort: port,
		CertDir: filepath.Join(env.work, "webhook-certs"),
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
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manager log:\n%s", deckhand.Logs(80))
		}
	})
	t.Cleanup(deckhand.Stop)
	return deckhand
}

// previousChart is the commit of the last chart that shipped its CRDs in
// crds/, which Helm installs once and never upgrades.
const previousChart = "189adf6"

// upgradeObjects are one object of each kind, written for the previous
// chart's CRDs too.
const upgradeObjects = `
apiVersion: apps.deckhand.dev/v1alpha1
kind: SidecarSet
metadata: {name: upgrade-log-shipper}
spec:
  selector: {matchLabels: {app: upgrade}}
  namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: helm-upgrade}}
  containers: [{name: log-shipper, image: registry.example/log-shipper:1}]
---
apiVersion: apps.deckhand.dev/v1alpha1
kind: PodSet
metadata: {name: upgrade-podset, namespace: helm-upgrade}
spec:
  replicas: 1
  selector: {matchLabels: {app: upgrade}}
  template:
    metadata: {labels: {app: upgrade}}
    spec: {containers: [{name: app, image: registry.k8s.io/pause:3.10}]}
---
apiVersion: apps.deckhand.dev/v1alpha1
kind: WebServer
metadata: {name: upgrade-web, namespace: helm-upgrade}
spec: {image: registry.k8s.io/pause:3.10, port: 8080, replicas: 1}
---
apiVersion: apps.deckhand.dev/v1alpha1
kind: RestartSchedule
metadata: {name: upgrade-restart, namespace: helm-upgrade}
spec:
  schedule: "0 3 * * *"
  target: {targetRef: {kind: Deployment, name: upgrade-web}}
`

// TestUpgradeFromPreviousChart installs the chart and the manager as they
// were at previousChart (CRDs in crds/), creates an object of each kind,
// upgrades to this chart (CRDs as templates) and manager and requires the objects' specs
// unchanged, the CRDs upgraded to this chart's (owned by the release,
// kept on uninstall) and every object reconciled again, a PodSet scaled
// after the upgrade included.
func TestUpgradeFromPreviousChart(t *testing.T) {
	env := startCluster(t, 10*time.Minute)
	ctx, c := env.ctx, env.client
	old := t.TempDir()
	archive := exec.Command("sh", "-c", "git archive "+previousChart+" | tar -x -C "+old)
	archive.Dir = testutil.RepoRoot(t)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("the tree of %s: %v\n%s", previousChart, err, out)
	}
	oldBinary, err := localcluster.BuildDeckhand(ctx, old, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runHelm(t, "install", "deckhand", filepath.Join(old, "charts", "deckhand"), env.kubeconfig,
		"--namespace", installNamespace, "--create-namespace"); err != nil {
		t.Fatal(err)
	}
	deckhand := env.startManager(t, oldBinary)
	testutil.Create(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "helm-upgrade"}})
	var objs []*unstructured.Unstructured
	var podSet *unstructured.Unstructured
	for _, obj := range parseObjects(t, []byte(upgradeObjects)) {
		testutil.Create(ctx, t, c, obj)
		objs = append(objs, obj)
		if obj.GetKind() == "PodSet" {
			podSet = obj
		}
	}
	reconciled := func(what string) {
		for _, obj := range objs {
			testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
					return false, err
				}
				observed, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
				return observed == obj.GetGeneration(), nil
			}, "%s %s reconciled %s", obj.GetKind(), obj.GetName(), what)
		}
	}
	reconciled("before the upgrade")
	specs := map[string]any{}
	generations := map[string]int64{}
	for _, obj := range objs {
		specs[key(obj)] = obj.Object["spec"]
		generations[key(obj)] = obj.GetGeneration()
	}
	deckhand.Stop()

	// The webhook configurations call this host (startManager), not the
	// chart's Service: the upgrade creates them again as the chart has
	// them. The CRDs exist, made by the previous chart's crds/ outside the
	// release: Helm adopts them once.
	cs := env.cluster.Clientset().AdmissionregistrationV1()
	if err := cs.MutatingWebhookConfigurations().Delete(ctx, localcluster.MutatingWebhookConfiguration, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cs.ValidatingWebhookConfigurations().Delete(ctx, localcluster.ValidatingWebhookConfiguration, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := runHelm(t, "upgrade", "deckhand", chartDir(t), env.kubeconfig, "--namespace", installNamespace,
		"--take-ownership"); err != nil {
		t.Fatal(err)
	} else {
		t.Log(out)
	}
	fresh := rendered(render(t, installNamespace))
	for _, plural := range []string{"sidecarsets", "podsets", "webservers", "restartschedules"} {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := c.Get(ctx, client.ObjectKey{Name: plural + ".apps.deckhand.dev"}, crd); err != nil {
			t.Fatal(err)
		}
		if a := crd.GetAnnotations(); a["helm.sh/resource-policy"] != "keep" || a["meta.helm.sh/release-name"] != "deckhand" {
			t.Errorf("CRD %s annotations %v: not kept and owned by the release", plural, a)
		}
		want := fresh.get(t, "CustomResourceDefinition/"+plural+".apps.deckhand.dev").Object["spec"].(map[string]any)["versions"]
		got := crd.Object["spec"].(map[string]any)["versions"]
		// Equal but for the null fields a rendering has and the API
		// server drops.
		if !apiequality.Semantic.DeepDerivative(want, got) || !apiequality.Semantic.DeepDerivative(got, want) {
			t.Errorf("CRD %s: its versions are not this chart's", plural)
		}
	}

	env.startManager(t, env.binary)
	for _, obj := range objs {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		// The API server defaults fields the new CRDs add when it reads an
		// object: every field the object had stays as it was.
		if !apiequality.Semantic.DeepDerivative(specs[key(obj)], obj.Object["spec"]) || obj.GetGeneration() != generations[key(obj)] {
			t.Errorf("%s: spec changed by the upgrade:\nbefore %v (generation %d)\nafter  %v (generation %d)",
				key(obj), specs[key(obj)], generations[key(obj)], obj.Object["spec"], obj.GetGeneration())
		}
	}
	if err := unstructured.SetNestedField(podSet.Object, int64(2), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, podSet); err != nil {
		t.Fatal(err)
	}
	reconciled("after the upgrade")
	testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(podSet), podSet); err != nil {
			return false, err
		}
		ready, _, _ := unstructured.NestedInt64(podSet.Object, "status", "readyReplicas")
		return ready == 2, nil
	}, "PodSet %s scaled to 2 ready pods after the upgrade", podSet.GetName())
}
