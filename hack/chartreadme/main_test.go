package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

func chart(t *testing.T) string {
	return filepath.Join(testutil.RepoRoot(t), "charts", "deckhand")
}

func read(t *testing.T, path string) []byte {
	return []byte(testutil.ReadFile(t, path))
}

// TestDocumented: the comments above keys, over several lines, become the
// description; keys inside a list default and undocumented keys are not
// values of their own; the default is the whole subtree.
func TestDocumented(t *testing.T) {
	got, err := documented([]byte(`# The file's own comment.

# -- Replicas of the
# manager.
replicas: 2
plain: 1
webhook:
  # -- Peers, as a list.
  from:
  - ipBlock:
      cidr: 0.0.0.0/0
    ports:
    - 443
  # -- The port.
  port: 9443
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []value{
		{"replicas", "2", "Replicas of the manager."},
		{"webhook.from", `[{"ipBlock":{"cidr":"0.0.0.0/0"},"ports":[443]}]`, "Peers, as a list."},
		{"webhook.port", "9443", "The port."},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("value %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestREADMEUpToDate: the chart's README has the table its values.yaml
// gives (make manifests writes it).
func TestREADMEUpToDate(t *testing.T) {
	docs, err := documented(read(t, filepath.Join(chart(t), "values.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	committed := read(t, filepath.Join(chart(t), "README.md"))
	fresh, err := withTable(committed, table(docs))
	if err != nil {
		t.Fatal(err)
	}
	if string(fresh) != string(committed) {
		t.Error("charts/deckhand/README.md is out of date: run make manifests")
	}
}

// TestEveryValueDocumentedAndInSchema: every key of values.yaml is
// documented itself or through all of its keys, and every documented value
// is a property of values.schema.json, so that the README, the schema and
// the values cannot part.
func TestEveryValueDocumentedAndInSchema(t *testing.T) {
	data := read(t, filepath.Join(chart(t), "values.yaml"))
	docs, err := documented(data)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, d := range docs {
		keys[d.Key] = true
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		t.Fatal(err)
	}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			key := strings.TrimPrefix(prefix+"."+k, ".")
			if keys[key] {
				continue
			}
			sub, ok := v.(map[string]any)
			if !ok || len(sub) == 0 {
				t.Errorf("%s has no # -- comment", key)
				continue
			}
			walk(key, sub)
		}
	}
	walk("", tree)

	var schema map[string]any
	if err := json.Unmarshal(read(t, filepath.Join(chart(t), "values.schema.json")), &schema); err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		node := schema
		for _, k := range strings.Split(d.Key, ".") {
			props, _ := node["properties"].(map[string]any)
			node, _ = props[k].(map[string]any)
			if node == nil {
				t.Errorf("%s is not in values.schema.json", d.Key)
				break
			}
		}
	}
}
