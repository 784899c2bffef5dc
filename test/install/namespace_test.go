package install

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// checkManagerEnv: the manager learns its namespace from the downward API,
// and its soft heap limit sits a little under the container's memory limit
// (below it, so the runtime collects before the kernel kills; near it, so
// the limit is used).
func checkManagerEnv(t *testing.T, c corev1.Container) {
	t.Helper()
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if e := env["POD_NAMESPACE"]; e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.namespace" {
		t.Errorf("POD_NAMESPACE is not the pod's namespace from the downward API: %+v", e)
	}
	limit := c.Resources.Limits[corev1.ResourceMemory]
	soft, err := parseGoMemLimit(env["GOMEMLIMIT"].Value)
	if err != nil {
		t.Fatalf("GOMEMLIMIT: %v", err)
	}
	if ratio := float64(soft) / float64(limit.Value()); ratio < 0.8 || ratio > 0.95 {
		t.Errorf("GOMEMLIMIT %s is %.2f of the memory limit %s, want 0.80-0.95", env["GOMEMLIMIT"].Value, ratio, limit.String())
	}
}

// parseGoMemLimit reads the forms of GOMEMLIMIT the shipped Deployment uses:
// a number of bytes with an optional KiB/MiB/GiB suffix.
func parseGoMemLimit(v string) (int64, error) {
	q, err := resource.ParseQuantity(strings.TrimSuffix(v, "B"))
	if err != nil {
		return 0, err
	}
	return q.Value(), nil
}

// renderIn renders the overlay dir of a copy of config/ whose
// config/default installs into ns: the one line a user changes (what
// `make build-installer NAMESPACE=ns` does).
func renderIn(t *testing.T, ns, dir string) string {
	t.Helper()
	tmp := t.TempDir()
	if out, err := exec.Command("cp", "-r", filepath.Join(repoRoot(t), "config"), tmp).CombinedOutput(); err != nil {
		t.Fatalf("copy config/: %v\n%s", err, out)
	}
	k := filepath.Join(tmp, "config", "default", "kustomization.yaml")
	data, err := os.ReadFile(k)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^namespace: .*$`)
	if !line.Match(data) {
		t.Fatal("config/default/kustomization.yaml has no namespace line")
	}
	if err := os.WriteFile(k, line.ReplaceAll(data, []byte("namespace: "+ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl(t), "kustomize", filepath.Join(tmp, "config", dir)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize config/%s: %v", dir, err)
	}
	return string(out)
}

// TestInstallIntoAnotherNamespace: with config/default's namespace changed,
// neither the self-managed install nor the cert-manager overlay names
// deckhand-system anywhere, and what depends on the namespace follows it:
// every namespaced object, the webhooks' Service, the pod webhook's
// exclusion of the manager's own pods, the serving certificate's DNS names
// and the CA injection.
func TestInstallIntoAnotherNamespace(t *testing.T) {
	const ns = "team-ops"
	for _, dir := range []string{"default", "certmanager"} {
		t.Run(dir, func(t *testing.T) {
			out := renderIn(t, ns, dir)
			if strings.Contains(out, namespace) {
				for i, l := range strings.Split(out, "\n") {
					if strings.Contains(l, namespace) {
						t.Errorf("line %d still names %s: %s", i+1, namespace, strings.TrimSpace(l))
					}
				}
			}
			ms := parse(t, []byte(out))
			for _, m := range ms {
				if m.obj.Namespace != "" && m.obj.Namespace != ns {
					t.Errorf("%s %s is in namespace %q, want %s", m.meta.Kind, m.obj.Name, m.obj.Namespace, ns)
				}
			}
			mm, ok := find(ms, "MutatingWebhookConfiguration", "deckhand-mutating-webhook-configuration")
			if !ok {
				t.Fatal("no MutatingWebhookConfiguration")
			}
			mwc := decode[admissionregistrationv1.MutatingWebhookConfiguration](t, mm)
			for _, w := range mwc.Webhooks {
				if w.ClientConfig.Service == nil || w.ClientConfig.Service.Namespace != ns {
					t.Errorf("webhook %s calls %+v, want the Service in %s", w.Name, w.ClientConfig.Service, ns)
				}
				if w.NamespaceSelector == nil {
					continue
				}
				for _, e := range w.NamespaceSelector.MatchExpressions {
					if e.Key == "kubernetes.io/metadata.name" && !slices.Contains(e.Values, ns) {
						t.Errorf("pod webhook %s does not exclude %s: %v", w.Name, ns, e.Values)
					}
				}
			}
			if dir != "certmanager" {
				return
			}
			cm, ok := find(ms, "Certificate", "deckhand-serving-cert")
			if !ok {
				t.Fatal("no serving Certificate")
			}
			if !strings.Contains(string(cm.raw), "deckhand-webhook-service."+ns+".svc") {
				t.Errorf("the serving certificate is not issued for the webhook Service in %s:\n%s", ns, cm.raw)
			}
			if got := mwc.Annotations["cert-manager.io/inject-ca-from"]; got != ns+"/deckhand-serving-cert" {
				t.Errorf("inject-ca-from = %q, want %s/deckhand-serving-cert", got, ns)
			}
			dm, _ := find(ms, "Deployment", "deckhand-controller-manager")
			checkManagerEnv(t, decode[appsv1.Deployment](t, dm).Spec.Template.Spec.Containers[0])
		})
	}
}
