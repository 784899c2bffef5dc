package localcluster

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestControlPlaneServesWebhooksByURL starts etcd + kube-apiserver, serves a
// mutating webhook on this host, installs a Service-style manifest through
// LocalWebhooks and checks that the API server really calls it.
func TestControlPlaneServesWebhooksByURL(t *testing.T) {
	c, ctx := startCluster(t, Options{})

	// RBAC is on: an unknown service account is refused, the admin is not.
	if _, err := c.Clientset().CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("admin cannot list namespaces: %v", err)
	}

	certDir := t.TempDir()
	ca, err := LocalWebhookCerts(certDir)
	if err != nil {
		t.Fatal(err)
	}
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	calls := make(chan string, 10)
	mux := http.NewServeMux()
	mux.HandleFunc("/mutate-configmaps", func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		calls <- review.Request.Name
		pt := admissionv1.PatchTypeJSONPatch
		review.Response = &admissionv1.AdmissionResponse{
			UID:       review.Request.UID,
			Allowed:   true,
			PatchType: &pt,
			Patch:     []byte(`[{"op":"add","path":"/metadata/labels","value":{"mutated-by":"local-webhook"}}]`),
		}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	})
	srv := &http.Server{Addr: "127.0.0.1:" + strconv.Itoa(port), Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		_ = srv.ListenAndServeTLS(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	}()
	t.Cleanup(func() { _ = srv.Close() })
	if err := WaitTLS(ctx, port, 10*time.Second); err != nil {
		t.Fatal(err)
	}

	manifest := filepath.Join(t.TempDir(), "manifests.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: test-mutating
webhooks:
- name: mconfigmap.test.deckhand.dev
  admissionReviewVersions: ["v1"]
  sideEffects: None
  failurePolicy: Fail
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-configmaps}
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  objectSelector:
    matchLabels: {test: webhook}
- name: unserved.test.deckhand.dev
  admissionReviewVersions: ["v1"]
  sideEffects: None
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /not-served}
  rules:
  - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	hooks := LocalWebhooks{
		ManifestPath: manifest,
		URL:          "https://127.0.0.1:" + strconv.Itoa(port),
		CABundle:     ca,
		Serves:       func(p string) bool { return p == "/mutate-configmaps" },
	}
	if err := hooks.Install(ctx, c.Clientset()); err != nil {
		t.Fatal(err)
	}
	got, err := c.Clientset().AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "test-mutating", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Webhooks) != 1 || got.Webhooks[0].ClientConfig.URL == nil {
		t.Fatalf("want exactly the served webhook, rewritten to a URL; got %+v", got.Webhooks)
	}

	// The webhook configuration takes a moment to reach the API server's
	// admission chain; retry the create until the mutation shows.
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + strconv.Itoa(i), Namespace: "default", Labels: map[string]string{"test": "webhook"}}}
		created, err := c.Clientset().CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create configmap: %v", err)
		}
		if created.Labels["mutated-by"] == "local-webhook" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the API server never called the local webhook; labels %v", created.Labels)
		}
		time.Sleep(200 * time.Millisecond)
	}
	select {
	case name := <-calls:
		if name == "" {
			t.Log("webhook called for a generateName object")
		}
	default:
		t.Fatal("webhook handler saw no request")
	}
}

// TestStopLeavesNoProcess checks that Stop ends every component.
func TestStopLeavesNoProcess(t *testing.T) {
	skipInShortMode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range c.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	dir := c.Dir()
	c.Stop()
	for _, pid := range pids {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			t.Errorf("process %d still exists after Stop: %s", pid, st)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temporary directory %s not removed", dir)
	}
}

// TestStartRefusesWhenNoControlPlaneIsWanted checks the guard of `make
// test-unit`: with NoControlPlaneEnv set, Start fails at once, naming the
// variable, and starts nothing (there is not even a binary to start).
func TestStartRefusesWhenNoControlPlaneIsWanted(t *testing.T) {
	t.Setenv(NoControlPlaneEnv, "1")
	c, err := Start(t.Context(), Options{BinDir: t.TempDir()})
	if err == nil {
		c.Stop()
		t.Fatal("Start started a control plane with " + NoControlPlaneEnv + " set")
	}
	if !strings.Contains(err.Error(), NoControlPlaneEnv) {
		t.Errorf("Start's error %q does not name %s", err, NoControlPlaneEnv)
	}
}

// skipInShortMode skips t, which starts a control plane, in -short mode
// (`make test-unit`).
func skipInShortMode(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a control plane (not in -short mode)")
	}
}

// startCluster starts a cluster of opts for t, stopped when t ends, whose
// component logs are printed if t fails; the context bounds t's requests.
func startCluster(t *testing.T, opts Options) (*Cluster, context.Context) {
	t.Helper()
	skipInShortMode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.Logs(40))
		}
	})
	return c, ctx
}
