package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// TestInstallYAML: dist/install.yaml applied cleanly with server-side apply
// (TestMain stops otherwise), and applying it a second time changed no
// object and left nothing for `kubectl diff` to report. The manager
// Deployment's pods pass the "restricted" Pod Security Standard the
// namespace enforces (kwok runs them; the manager under test runs on the
// host, so these fake replicas do nothing and stay as they are).
func TestInstallYAML(t *testing.T) {
	rec := suite.install
	if rec.manifestObjectCount < 20 {
		t.Fatalf("only %d objects of dist/install.yaml found in the cluster", rec.manifestObjectCount)
	}
	for obj, v := range rec.before {
		if rec.after[obj] != v {
			t.Errorf("the second apply changed %s: %s -> %s", obj, v, rec.after[obj])
		}
	}
	if rec.diffErr != nil {
		t.Errorf("kubectl diff --server-side after the second apply reports differences or failed: %v\n%s", rec.diffErr, rec.diffOut)
	}
	for _, line := range strings.Split(strings.TrimSpace(rec.second), "\n") {
		if !strings.HasSuffix(line, "serverside-applied") {
			t.Errorf("second apply: unexpected output %q", line)
		}
	}

	dep := &appsv1.Deployment{}
	testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		err := suite.client.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: managerDeployment}, dep)
		return err == nil && dep.Status.ReadyReplicas == 2, err
	}, "Deployment %s/%s has 2 ready (kwok) replicas under the restricted Pod Security Standard (has %d; conditions %v)",
		systemNamespace, managerDeployment, dep.Status.ReadyReplicas, dep.Status.Conditions)

	// The manager filled the empty Secret; applying the installer again
	// (what `make deploy` does on an upgrade) must not empty it: the
	// installer's Secret has no data, so server-side apply leaves the
	// manager's fields alone. (Dry run of that one document: the webhook
	// configurations were re-pointed at the host and must stay so.)
	ctx := tctx(t)
	doc := ""
	for _, d := range strings.Split(testutil.ReadFile(t, suite.installer), "\n---\n") {
		if strings.Contains(d, "kind: Secret\n") && strings.Contains(d, "name: "+certSecret+"\n") {
			doc = d
		}
	}
	if doc == "" {
		t.Fatalf("no Secret %s in dist/install.yaml", certSecret)
	}
	secretFile := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(secretFile, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := kubectl(ctx, "apply", "--server-side", "--dry-run=server", "-f", secretFile, "-o", "jsonpath={.data.ca\\.crt}")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out) == "" {
		t.Error("re-applying dist/install.yaml would empty the certificate Secret")
	}
}

// TestManagerIdentityIsRefusedWhatItMustNotDo: the manager's own identity
// (its ServiceAccount token) is refused access outside its job.
func TestManagerIdentityIsRefusedWhatItMustNotDo(t *testing.T) {
	ctx := tctx(t)
	ns := namespace(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app-credentials", Namespace: ns},
		StringData: map[string]string{"password": "hunter2"}}
	create(t, secret)
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: systemNamespace}}
	create(t, other)
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), other) })
	foreignHook := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "e2e-someone-elses-webhooks"}}
	create(t, foreignHook)
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), foreignHook) })
	var nodes corev1.NodeList
	if err := suite.client.List(ctx, &nodes); err != nil || len(nodes.Items) == 0 {
		t.Fatalf("listing nodes as admin: %v (%d)", err, len(nodes.Items))
	}

	// A Deployment Deckhand does not own: RBAC lets the manager patch it (a
	// RestartSchedule restarts any), the admission policy only its restart
	// annotation.
	workload := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "app"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "app"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}},
	}}
	create(t, workload)

	sa, cs := suite.saClient, suite.saClientset
	refused := []struct {
		what string
		do   func() error
	}{
		{"read a Secret in another namespace", func() error {
			return sa.Get(ctx, client.ObjectKeyFromObject(secret), &corev1.Secret{})
		}},
		{"list Secrets cluster-wide", func() error { return sa.List(ctx, &corev1.SecretList{}) }},
		{"list Secrets of another namespace", func() error { return sa.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)) }},
		{"update a Secret in deckhand-system other than its certificate", func() error {
			s := other.DeepCopy()
			s.StringData = map[string]string{"x": "y"}
			return sa.Update(ctx, s)
		}},
		{"create a Secret", func() error {
			return sa.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: systemNamespace}})
		}},
		{"create a ClusterRole", func() error {
			return sa.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-escalate"},
				Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}})
		}},
		{"bind a ClusterRole", func() error {
			return sa.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-escalate"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: managerSA, Namespace: systemNamespace}}})
		}},
		{"delete a Node", func() error { return sa.Delete(ctx, nodes.Items[0].DeepCopy()) }},
		{"create a Namespace", func() error {
			return sa.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-not-allowed"}})
		}},
		{"delete a Namespace", func() error {
			return sa.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}},
		{"update someone else's webhook configuration", func() error {
			h := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(foreignHook), h); err != nil {
				return fmt.Errorf("admin get: %w", err)
			}
			h.Labels = map[string]string{"x": "y"}
			return sa.Update(ctx, h)
		}},
		{"delete its own webhook configuration", func() error {
			return sa.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: validatingConfig}})
		}},
		{"delete a Deckhand CRD", func() error {
			return cs.Discovery().RESTClient().Delete().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/podsets.apps.deckhand.dev").Do(ctx).Error()
		}},
		{"create a token for a ServiceAccount", func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
			return err
		}},
		{"exec into a pod", func() error {
			return cs.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name("any").SubResource("exec").Do(ctx).Error()
		}},
		{"delete a Deployment", func() error {
			return sa.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "any", Namespace: ns}})
		}},
		{"create a MutatingAdmissionPolicy (policy injection is off)", func() error {
			return sa.Create(ctx, &admissionregistrationv1.MutatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-not-allowed"}})
		}},
		{"change the image of a Deployment it does not own (the admission policy)", func() error {
			_, err := cs.AppsV1().Deployments(ns).Patch(ctx, workload.Name, types.StrategicMergePatchType,
				[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"attacker.example/app:1"}]}}}}`), metav1.PatchOptions{})
			return err
		}},
		{"update a SidecarSet's spec", func() error {
			return sa.Update(ctx, &deckhandv1alpha1.SidecarSet{ObjectMeta: metav1.ObjectMeta{Name: "any", ResourceVersion: "1"}})
		}},
		{"impersonate a user", func() error {
			cfg := *suite.saConfig
			cfg.Impersonate.UserName = "admin"
			c, err := client.New(&cfg, client.Options{Scheme: testenv.Scheme()})
			if err != nil {
				return err
			}
			return c.List(ctx, &corev1.PodList{}, client.InNamespace(ns))
		}},
	}
	for _, r := range refused {
		err := r.do()
		if !apierrors.IsForbidden(err) {
			t.Errorf("the manager's identity may %s: got %v, want Forbidden", r.what, err)
		}
	}

	// ... and allowed what it needs beyond the controllers: its own
	// certificate Secret and Lease.
	if err := sa.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: certSecret}, &corev1.Secret{}); err != nil {
		t.Errorf("the manager's identity cannot read its certificate Secret: %v", err)
	}
	if _, err := cs.CoordinationV1().Leases(systemNamespace).Get(ctx, "deckhand.apps.deckhand.dev", metav1.GetOptions{}); err != nil {
		t.Errorf("the manager's identity cannot read its leader-election Lease: %v", err)
	}
}

// TestMetricsEndpointAuth: the manager's HTTPS metrics endpoint refuses an
// anonymous request and a token without the metrics-reader role, and
// serves one with it.
func TestMetricsEndpointAuth(t *testing.T) {
	ctx := tctx(t)
	ns := namespace(t)
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", suite.deckhand.MetricsPort)
	// What is tested here is who may read the endpoint; the server's
	// identity, as a scraper verifies it, is TestMonitoringBundleReadsExportedMetrics'.
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
	}}
	get := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	token := func(sa string) string {
		t.Helper()
		create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}})
		tok, err := suite.clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tok.Status.Token
	}

	if code, body := get(""); code != http.StatusUnauthorized {
		t.Errorf("anonymous GET /metrics: %d %q, want 401", code, body)
	}
	// controller-runtime's filter answers an invalid token with 500
	// "Authentication failed" (the TokenReview's error), not 401.
	if code, body := get("not-a-valid-token"); (code != http.StatusUnauthorized && code != http.StatusInternalServerError) || strings.Contains(body, "controller_runtime") {
		t.Errorf("GET /metrics with a bogus token: %d %.100q, want it refused (401 or 500)", code, body)
	}
	if code, body := get(token("nobody")); code != http.StatusForbidden {
		t.Errorf("GET /metrics without the metrics-reader role: %d %q, want 403", code, body)
	}

	scraper := token("prometheus")
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: ns}},
	}
	create(t, binding)
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), binding) })
	var code int
	var body string
	testutil.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		code, body = get(scraper)
		return code == http.StatusOK, nil
	}, "GET /metrics with a token bound to %s answers 200 (last: %d %.200q)", metricsReaderRole, code, body)
	for _, want := range []string{"controller_runtime_reconcile_total", "controller_runtime_webhook_requests_total", "deckhand_",
		`deckhand_build_info{goversion="go`} {
		if !strings.Contains(body, want) {
			t.Errorf("the metrics lack %s", want)
		}
	}
}

// TestVersion: the binary says which build it is. An unstamped build (go
// build, as this suite's) is "dev"; make build and make release stamp it.
func TestVersion(t *testing.T) {
	out, err := exec.CommandContext(tctx(t), suite.binary, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("deckhand --version: %v\n%s", err, out)
	}
	if got := string(out); !strings.HasPrefix(got, "deckhand dev (revision ") || !strings.Contains(got, runtime.Version()) {
		t.Errorf("deckhand --version printed %q, want \"deckhand dev (revision ..., %s)\"", got, runtime.Version())
	}
}
