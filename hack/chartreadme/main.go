// Command chartreadme writes the table of values into a chart's README.md
// from the comments of its values.yaml:
//
//	chartreadme charts/deckhand
//
// A value is documented by the comment right above its key that starts with
// "# -- " (helm-docs' convention); the table lists every documented value
// with its default and that comment, between the README's
// "<!-- values:begin -->" and "<!-- values:end -->" lines, and leaves the
// rest of the README as written.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/deckhand-dev/deckhand/hack/internal/command"
)

const (
	beginMarker = "<!-- values:begin -->"
	endMarker   = "<!-- values:end -->"
)

func main() {
	command.Main("chartreadme", "CHART_DIR", run)
}

func run(chart string) error {
	values, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return err
	}
	readmePath := filepath.Join(chart, "README.md")
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		return err
	}
	docs, err := documented(values)
	if err != nil {
		return err
	}
	out, err := withTable(readme, table(docs))
	if err != nil {
		return fmt.Errorf("%s: %w", readmePath, err)
	}
	return os.WriteFile(readmePath, out, 0o644)
}

// value is one documented key of values.yaml.
type value struct {
	Key         string // dotted path, e.g. webhook.port
	Default     string // the default as compact JSON
	Description string
}

var (
	docLine  = regexp.MustCompile(`^\s*# -- (.*)$`)
	moreLine = regexp.MustCompile(`^\s*#\s?(.*)$`)
	keyLine  = regexp.MustCompile(`^( *)([A-Za-z][A-Za-z0-9_]*):`)
	itemLine = regexp.MustCompile(`^( *)- `)
)

// documented returns the documented values of values.yaml in file order.
func documented(data []byte) ([]value, error) {
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return nil, err
	}
	var out []value
	var path []string
	var doc []string
	inDoc := false
	// The indentation of the list being read, whose items' keys are a
	// default's content rather than values of their own; -1 outside lists.
	listIndent := -1
	for i, line := range strings.Split(string(data), "\n") {
		if m := docLine.FindStringSubmatch(line); m != nil {
			doc, inDoc = []string{m[1]}, true
			continue
		}
		if m := moreLine.FindStringSubmatch(line); m != nil {
			if inDoc {
				doc = append(doc, m[1])
			}
			continue
		}
		if m := itemLine.FindStringSubmatch(line); m != nil {
			if listIndent < 0 || len(m[1]) < listIndent {
				listIndent = len(m[1])
			}
			inDoc = false
			continue
		}
		m := keyLine.FindStringSubmatch(line)
		if m == nil || (listIndent >= 0 && len(m[1]) > listIndent) {
			inDoc = false
			continue
		}
		listIndent = -1
		depth := len(m[1]) / 2
		if depth > len(path) {
			return nil, fmt.Errorf("values.yaml line %d: indented by %d spaces, not two per level", i+1, len(m[1]))
		}
		path = append(path[:depth], m[2])
		if !inDoc {
			continue
		}
		inDoc = false
		def, err := json.Marshal(lookup(tree, path))
		if err != nil {
			return nil, err
		}
		out = append(out, value{Key: strings.Join(path, "."), Default: string(def), Description: strings.Join(doc, " ")})
	}
	if len(out) == 0 {
		return nil, errors.New("values.yaml documents no value (# -- comments)")
	}
	return out, nil
}

func lookup(tree map[string]any, path []string) any {
	var v any = tree
	for _, k := range path {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

// table renders the values as a Markdown table.
func table(values []value) string {
	var b strings.Builder
	b.WriteString("| Key | Default | Description |\n|---|---|---|\n")
	for _, v := range values {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", v.Key, v.Default, strings.ReplaceAll(v.Description, "|", `\|`))
	}
	return b.String()
}

// withTable replaces what lies between the markers of readme by tbl.
func withTable(readme []byte, tbl string) ([]byte, error) {
	begin := bytes.Index(readme, []byte(beginMarker+"\n"))
	end := bytes.Index(readme, []byte(endMarker))
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("no %q line followed by %q", beginMarker, endMarker)
	}
	var out bytes.Buffer
	out.Write(readme[:begin+len(beginMarker)+1])
	out.WriteString(tbl)
	out.Write(readme[end:])
	return out.Bytes(), nil
}
