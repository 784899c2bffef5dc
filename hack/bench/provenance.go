package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// provenance is the source a run measured: every figure must be traceable to
// a commit, and a report written into docs/ to a clean one.
type provenance struct {
	// Describe is `git describe --always --dirty`.
	Describe string `json:"describe"`
	Commit   string `json:"commit"`
	// Dirty: tracked files differ from the commit, or Go sources or module
	// files that the build would pick up are not tracked.
	Dirty     bool     `json:"dirty"`
	Untracked []string `json:"untracked,omitempty"`
}

func git(root string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

func sourceProvenance(root string) (provenance, error) {
	var p provenance
	var err error
	if p.Describe, err = git(root, "describe", "--always", "--dirty"); err != nil {
		return p, err
	}
	if p.Commit, err = git(root, "rev-parse", "HEAD"); err != nil {
		return p, err
	}
	untracked, err := git(root, "ls-files", "--others", "--exclude-standard", "--", "*.go", "go.mod", "go.sum")
	if err != nil {
		return p, err
	}
	if untracked != "" {
		p.Untracked = strings.Split(untracked, "\n")
	}
	p.Dirty = strings.HasSuffix(p.Describe, "-dirty") || len(p.Untracked) > 0
	return p, nil
}

// short is the commit's first 12 characters, with "-dirty" for a dirty tree.
func (p provenance) short() string {
	s := p.Commit
	if len(s) > 12 {
		s = s[:12]
	}
	if p.Dirty {
		s += "-dirty"
	}
	return s
}

// insideDir reports whether path lies in dir.
func insideDir(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// rawRow is a summary row in the raw results.
type rawRow struct {
	Item     string `json:"item"`
	What     string `json:"what"`
	Target   string `json:"target"`
	Measured string `json:"measured"`
	// Judged is the figure the verdict read (null for a row without a
	// target); Verdict is met, missed or tie ("" without a target).
	Judged  *figure `json:"judged"`
	Verdict string  `json:"verdict"`
}

// dataPath is where the raw results of a report written to out go:
// bench-data/<UTC start>-<commit>.json beside it.
func (r *report) dataPath(out string) string {
	name := fmt.Sprintf("%s-%s.json", r.start.UTC().Format("20060102T150405Z"), r.src.short())
	return filepath.Join(filepath.Dir(out), "bench-data", name)
}

// writeData writes the raw results: the source, the run and the machine
// (the load average at start and end, the control plane's versions), the
// summary rows and each benchmark's raw results by the name it recorded them
// under.
func (r *report) writeData(path string) error {
	rows := make([]rawRow, 0, len(r.rows))
	for _, x := range r.rows {
		rows = append(rows, rawRow{x.item, x.what, x.target, x.measured, x.judged, string(x.verdict)})
	}
	d := map[string]any{
		"source": r.src, "quick": r.cfg.quick, "start": r.start.UTC(), "end": r.end.UTC(),
		"machine": r.machine(), "loadAverage": []string{r.load0, r.load1}, "controlPlane": r.versions(),
		"rows": rows, "notes": r.notes, "raw": r.raw,
	}
	data, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
