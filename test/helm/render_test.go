package helm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// Helm's own labels: the chart adds them to every object, config/ has
// kustomize's managed-by instead.
var helmLabels = []string{
	"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version",
}

// helmBinary is bin/helm, built by `make helm` from hack/helm.
func helmBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(testutil.RepoRoot(t), "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found: run `make helm`", bin)
	}
	return bin
}

func chartDir(t *testing.T) string {
	return filepath.Join(testutil.RepoRoot(t), "charts", "deckhand")
}

// runHelm runs bin/helm with a throw-away configuration and cache, so no
// user setting reaches the test.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// render runs helm template with the given --set values, in namespace ns,
// and returns the objects by key.
func render(t *testing.T, ns string, set ...string) map[string]*unstructured.Unstructured {
	t.Helper()
	args := []string{"template", "deckhand", chartDir(t), "--namespace", ns}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return parseObjects(t, []byte(out))
}

func key(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetKind() + "/" + obj.GetName()
	}
	return obj.GetKind() + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

func parseObjects(t *testing.T, data []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	objs := map[string]*unstructured.Unstructured{}
	err := localcluster.EachDocument(data, func(doc []byte) error {
		obj := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal(doc, &obj.Object); err != nil {
			return err
		}
		if len(obj.Object) == 0 {
			return nil
		}
		if _, dup := objs[key(obj)]; dup {
			return fmt.Errorf("%s twice", key(obj))
		}
		objs[key(obj)] = obj
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func dropLabels(obj *unstructured.Unstructured, names ...string) {
	labels := obj.GetLabels()
	for _, n := range names {
		delete(labels, n)
	}
	if len(labels) == 0 {
		unstructured.RemoveNestedField(obj.Object, "metadata", "labels")
		return
	}
	obj.SetLabels(labels)
}

// TestDefaultsMatchInstallYAML renders the chart with its default values
// into deckhand-system and compares it, object by object and field by
// field, with dist/install.yaml.
func TestDefaultsMatchInstallYAML(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testutil.RepoRoot(t), "dist", "install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := parseObjects(t, data)
	// The one intended difference: the chart's image tag defaults to its
	// appVersion, dist/install.yaml has the Makefile's default IMG (tag dev).
	got := render(t, "deckhand-system", "image.tag=dev")

	// Helm installs into a namespace that exists (or that --create-namespace
	// makes); the chart has no Namespace object (docs/helm.md labels it for
	// the restricted Pod Security Standard).
	delete(want, "Namespace/deckhand-system")
	for k, obj := range want {
		dropLabels(obj, helmLabels...)
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: in dist/install.yaml, not rendered by the chart", k)
			continue
		}
		dropLabels(g, helmLabels...)
		// The one annotation only Helm reads (crds.keep, TestCRDTemplates).
		if g.GetKind() == "CustomResourceDefinition" {
			unstructured.RemoveNestedField(g.Object, "metadata", "annotations", "helm.sh/resource-policy")
		}
		for _, d := range diff("", obj.Object, g.Object) {
			t.Errorf("%s: %s", k, d)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: rendered by the chart, not in dist/install.yaml", k)
		}
	}
}

// diff lists the fields in which got differs from want.
func diff(path string, want, got any) []string {
	wm, wok := want.(map[string]any)
	gm, gok := got.(map[string]any)
	if wok && gok {
		keys := map[string]bool{}
		for k := range wm {
			keys[k] = true
		}
		for k := range gm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []string
		for _, k := range sorted {
			out = append(out, diff(path+"."+k, wm[k], gm[k])...)
		}
		return out
	}
	wl, wok := want.([]any)
	gl, gok := got.([]any)
	if wok && gok && len(wl) == len(gl) {
		var out []string
		for i := range wl {
			out = append(out, diff(fmt.Sprintf("%s[%d]", path, i), wl[i], gl[i])...)
		}
		return out
	}
	if !reflect.DeepEqual(want, got) {
		return []string{fmt.Sprintf("%s: dist/install.yaml has %v, the chart %v", path, want, got)}
	}
	return nil
}

// TestCRDsAreConfigCopies: the chart's files/crds are byte-equal copies of
// config/crd/bases (make manifests copies them), and nothing else.
func TestCRDsAreConfigCopies(t *testing.T) {
	root := testutil.RepoRoot(t)
	bases, err := filepath.Glob(filepath.Join(root, "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	copies, err := filepath.Glob(filepath.Join(chartDir(t), "files", "crds", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(bases) == 0 || len(copies) != len(bases) {
		t.Fatalf("config/crd/bases has %d files, charts/deckhand/files/crds %d: run make manifests", len(bases), len(copies))
	}
	assertCopies(t, filepath.Join(root, "config", "crd", "bases"), filepath.Join(chartDir(t), "files", "crds"))
	assertCopies(t, filepath.Join(root, "config", "rbac"), filepath.Join(chartDir(t), "files", "rbac"))
	assertCopies(t, filepath.Join(root, "config", "webhook"), filepath.Join(chartDir(t), "files", "webhook"))
	assertCopies(t, filepath.Join(root, "config", "monitoring"), filepath.Join(chartDir(t), "files", "monitoring"))
	assertCopies(t, filepath.Join(root, "config", "admission-policy"), filepath.Join(chartDir(t), "files", "admission-policy"))
	for _, c := range []string{"self-managed-certs", "policy-injection", "sidecarset-controller", "podset-controller", "webserver-controller", "restartschedule-controller"} {
		assertCopies(t, filepath.Join(root, "config", "components", c), filepath.Join(chartDir(t), "files", "components", c))
	}
}

// assertCopies checks that every file in copyDir is byte-equal to the file
// of the same name in srcDir.
func assertCopies(t *testing.T, srcDir, copyDir string) {
	t.Helper()
	entries, err := os.ReadDir(copyDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		got, err := os.ReadFile(filepath.Join(copyDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(srcDir, e.Name()))
		if err != nil {
			t.Errorf("%s: no such file in %s", e.Name(), srcDir)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from %s: run make manifests", filepath.Join(copyDir, e.Name()), filepath.Join(srcDir, e.Name()))
		}
	}
}

// TestLintAndPackage: helm lint (strict too) accepts the chart, and helm
// package makes an archive of it.
func TestLintAndPackage(t *testing.T) {
	if out, err := runHelm(t, "lint", chartDir(t)); err != nil {
		t.Error(err)
	} else {
		t.Log(out)
	}
	if _, err := runHelm(t, "lint", "--strict", chartDir(t)); err != nil {
		t.Error(err)
	}
	dir := t.TempDir()
	if _, err := runHelm(t, "package", chartDir(t), "--destination", dir); err != nil {
		t.Fatal(err)
	}
	if archives, _ := filepath.Glob(filepath.Join(dir, "deckhand-*.tgz")); len(archives) != 1 {
		t.Errorf("helm package wrote %v, want one deckhand-<version>.tgz", archives)
	}
}
