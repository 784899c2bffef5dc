package layout

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// mapDoc is the document whose Layout section maps the tree.
const mapDoc = "docs/development.md"

// apiDoc is the API reference `make api-docs` writes from api/v1alpha1.
const apiDoc = "docs/api.md"

// TestDevelopmentMapListsTheTree fails naming every Go package (of any
// module in the repository) and every top-level folder that the Layout
// section of docs/development.md does not list, and every folder it lists
// that does not exist.
func TestDevelopmentMapListsTheTree(t *testing.T) {
	root := testutil.RepoRoot(t)
	mapped, err := mappedFolders(filepath.Join(root, mapDoc))
	if err != nil || len(mapped) == 0 {
		t.Fatalf("%s: %d folder lines in its Layout section, error %v", mapDoc, len(mapped), err)
	}
	folders, err := treeFolders(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range folders {
		if !mapped[f] {
			t.Errorf("%s/ is not in the Layout section of %s: add a line saying what it is for", f, mapDoc)
		}
	}
	for f := range mapped {
		if info, err := os.Stat(filepath.Join(root, f)); err != nil || !info.IsDir() {
			t.Errorf("the Layout section of %s lists %s/, which is not a folder of the tree", mapDoc, f)
		}
	}
}

// mappedFolders reads the folder lines of the document's "## Layout"
// section: in its fenced blocks, a line whose first word ends in a slash
// names that folder.
func mappedFolders(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mapped := map[string]bool{}
	inLayout, inBlock := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inLayout = line == "## Layout"
		case !inLayout:
		case strings.HasPrefix(line, "```"):
			inBlock = !inBlock
		case inBlock:
			fields := strings.Fields(line)
			if len(fields) > 0 && strings.HasSuffix(fields[0], "/") && fields[0] == line[:len(fields[0])] {
				mapped[strings.TrimSuffix(fields[0], "/")] = true
			}
		}
	}
	return mapped, sc.Err()
}

// ignoredFolders returns the folders .gitignore anchors to the root
// ("/bin/"): build output and local state, never part of the map.
func ignoredFolders(root string) (map[string]bool, error) {
	data, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err != nil {
		return nil, err
	}
	ignored := map[string]bool{".git": true}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "/") && strings.HasSuffix(line, "/") && !strings.ContainsAny(line, "*?[") {
			ignored[strings.Trim(line, "/")] = true
		}
	}
	return ignored, nil
}

// treeFolders lists the folders the map must name: every top-level folder
// and every folder holding Go files.
func treeFolders(root string) ([]string, error) {
	ignored, err := ignoredFolders(root)
	if err != nil {
		return nil, err
	}
	var folders []string
	err = walkTree(root, ignored, func(rel string, d fs.DirEntry) error {
		if d.IsDir() {
			if !strings.Contains(rel, "/") {
				folders = append(folders, rel)
			}
			return nil
		}
		if dir := filepath.ToSlash(filepath.Dir(rel)); strings.HasSuffix(rel, ".go") && dir != "." {
			folders = append(folders, dir)
		}
		return nil
	})
	slices.Sort(folders)
	return slices.Compact(folders), err
}

// walkTree calls visit with the slash-separated path, relative to root, of
// every folder and file below root, skipping the ignored folders and, below
// the top level, what the go tool skips (testdata, names starting with "."
// or "_").
func walkTree(root string, ignored map[string]bool, visit func(rel string, d fs.DirEntry) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			top := !strings.Contains(rel, "/")
			if ignored[rel] || (!top && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_"))) {
				return filepath.SkipDir
			}
		}
		return visit(rel, d)
	})
}

// TestAPIReferenceUpToDate runs `make api-docs` into a scratch file and
// fails, naming the first line that differs, unless the committed
// docs/api.md is exactly what the Go types and their markers give now. It
// also checks that the reference has a section for each of the four kinds.
func TestAPIReferenceUpToDate(t *testing.T) {
	root := testutil.RepoRoot(t)
	fresh := filepath.Join(t.TempDir(), "api.md")
	cmd := exec.Command("make", "--no-print-directory", "-s", "api-docs", "API_DOCS="+fresh)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make api-docs: %v\n%s", err, out)
	}
	want, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, apiDoc))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		line := 0
		for line < min(len(g), len(w)) && g[line] == w[line] {
			line++
		}
		g, w = append(g, ""), append(w, "")
		t.Errorf("%s is not what the API types give: run `make api-docs` and commit it. Line %d:\n  committed: %s\n  generated: %s",
			apiDoc, line+1, g[line], w[line])
	}
	for _, kind := range []string{"SidecarSet", "PodSet", "WebServer", "RestartSchedule"} {
		if !bytes.Contains(want, []byte("\n#### "+kind+"\n")) {
			t.Errorf("make api-docs wrote no section for the kind %s", kind)
		}
	}
}

// maxFileLines is the most lines a hand-written Go file outside api/ may
// have: past it a file holds more than one job, and a reader looking for a
// behaviour by its name has to search inside it.
const maxFileLines = 400

// TestNoHandWrittenFileOverTheLimit fails naming every hand-written Go file
// (tests, generated files and the API types, whose markers and field
// comments are their documentation, aside) longer than maxFileLines.
func TestNoHandWrittenFileOverTheLimit(t *testing.T) {
	root := testutil.RepoRoot(t)
	ignored, err := ignoredFolders(root)
	if err != nil {
		t.Fatal(err)
	}
	ignored["api"] = true
	checked := 0
	err = walkTree(root, ignored, func(rel string, d fs.DirEntry) error {
		name := d.Name()
		if d.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "zz_generated") {
			return nil
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		checked++
		if n := bytes.Count(data, []byte("\n")); n > maxFileLines {
			t.Errorf("%s has %d lines, more than %d: split it by what its parts do", rel, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d Go files checked: the walk missed the tree", checked)
	}
}
