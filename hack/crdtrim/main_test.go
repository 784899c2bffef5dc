package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// lastAppliedLimit is what the API server allows all annotations of one
// object together; client-side apply stores the whole object, as JSON, in
// one of them.
const lastAppliedLimit = 256 * 1024

// generated runs controller-gen over api/ as `make manifests` does and
// returns the CRD directory before and after trimDir.
func generated(t *testing.T) (before, after string) {
	t.Helper()
	root := testutil.RepoRoot(t)
	gens, _ := filepath.Glob(filepath.Join(root, "bin", "controller-gen-*"))
	if len(gens) == 0 {
		t.Fatal("no bin/controller-gen-*: run `make manifests` once")
	}
	before, after = t.TempDir(), t.TempDir()
	cmd := exec.Command(gens[0], "crd:generateEmbeddedObjectMeta=true", "paths=./api/...", "output:crd:artifacts:config="+before)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("controller-gen: %v\n%s", err, out)
	}
	cp := exec.Command("cp", "-r", before+"/.", after)
	if out, err := cp.CombinedOutput(); err != nil {
		t.Fatalf("cp: %v\n%s", err, out)
	}
	if err := trimDir(after); err != nil {
		t.Fatal(err)
	}
	return before, after
}

func load(t *testing.T, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// withoutDescriptions is v with every "description" key removed, wherever
// it is.
func withoutDescriptions(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if k != "description" {
				out[k] = withoutDescriptions(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = withoutDescriptions(x)
		}
		return out
	}
	return v
}

// TestTrimmedCRDsFitClientSideApply: every trimmed CRD fits the annotation
// limit both as the YAML a user applies and as the JSON the annotation
// holds, and the untrimmed PodSet did not.
func TestTrimmedCRDsFitClientSideApply(t *testing.T) {
	before, after := generated(t)
	files, _ := filepath.Glob(filepath.Join(after, "*.yaml"))
	if len(files) != 4 {
		t.Fatalf("want the CRDs of the four kinds, got %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		asJSON, err := json.Marshal(load(t, f))
		if err != nil {
			t.Fatal(err)
		}
		if len(data) >= lastAppliedLimit || len(asJSON) >= lastAppliedLimit {
			t.Errorf("%s: %d bytes of YAML, %d of JSON: over the %d of client-side apply's annotation",
				filepath.Base(f), len(data), len(asJSON), lastAppliedLimit)
		}
	}
	untrimmed, err := json.Marshal(load(t, filepath.Join(before, "apps.deckhand.dev_podsets.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	if len(untrimmed) < lastAppliedLimit {
		t.Errorf("the untrimmed PodSet CRD is %d bytes of JSON: this test no longer shows the trim is needed", len(untrimmed))
	}
}

// TestTrimRemovesOnlyDescriptions: apart from descriptions, the trimmed
// CRDs are controller-gen's, so the API server validates (types, enums,
// required, formats, CEL rules, defaults) exactly what it did.
func TestTrimRemovesOnlyDescriptions(t *testing.T) {
	before, after := generated(t)
	files, _ := filepath.Glob(filepath.Join(before, "*.yaml"))
	for _, f := range files {
		name := filepath.Base(f)
		b, a := load(t, f), load(t, filepath.Join(after, name))
		if !reflect.DeepEqual(withoutDescriptions(b), withoutDescriptions(a)) {
			t.Errorf("%s: the trim changed more than descriptions", name)
		}
		if reflect.DeepEqual(b, a) {
			t.Errorf("%s: the trim removed nothing", name)
		}
	}
}

// TestTrimKeepsDeckhandDescriptions pins, field by field, which
// descriptions stay (Deckhand's, including a Deckhand field of a
// Kubernetes type) and which go (those of Kubernetes' types).
func TestTrimKeepsDeckhandDescriptions(t *testing.T) {
	_, after := generated(t)
	cases := []struct {
		file string
		path string
		kept bool
	}{
		{"podsets", "spec.properties.template", true},
		{"podsets", "spec.properties.selector", true},
		{"podsets", "spec.properties.updateStrategy.properties.partition", true},
		{"podsets", "spec.properties.template.properties.spec", false},
		{"podsets", "spec.properties.template.properties.spec.properties.containers.items.properties.image", false},
		{"podsets", "spec.properties.selector.properties.matchLabels", false},
		{"podsets", "status.properties.conditions.items.properties.reason", false},
		{"podsets", "apiVersion", false},
		// SidecarContainer embeds corev1.Container: its own fields keep
		// their descriptions, the Container's lose them.
		{"sidecarsets", "spec.properties.containers", true},
		{"sidecarsets", "spec.properties.containers.items.properties.podInjectPolicy", true},
		{"sidecarsets", "spec.properties.containers.items.properties.image", false},
		{"sidecarsets", "spec.properties.containers.items.properties.env.items.properties.valueFrom", false},
		{"sidecarsets", "spec.properties.volumes", true},
		{"sidecarsets", "spec.properties.volumes.items.properties.configMap", false},
		{"webservers", "spec.properties.image", true},
	}
	for _, c := range cases {
		t.Run(c.file+":"+c.path, func(t *testing.T) {
			crd := load(t, filepath.Join(after, "apps.deckhand.dev_"+c.file+".yaml"))
			versions := dig(crd, "spec", "versions").([]any)
			node := dig(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties")
			for _, k := range strings.Split(c.path, ".") {
				m, ok := node.(map[string]any)
				if !ok {
					t.Fatalf("no %s in the schema", c.path)
				}
				node = m[k]
			}
			m, ok := node.(map[string]any)
			if !ok {
				t.Fatalf("no %s in the schema", c.path)
			}
			if _, has := m["description"]; has != c.kept {
				t.Errorf("description kept: %v, want %v", has, c.kept)
			}
		})
	}
}
