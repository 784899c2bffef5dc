// Package release checks `make release`: every artefact is written, pinned
// to the version, and listed with its SHA-256 in SHA256SUMS.
package release

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

const version = "v0.0.0-test.1"

// TestRelease runs `make release` for this machine's platform only (the
// default is four; cross-compiling them all would add minutes to every
// `make test`) and checks what it wrote.
func TestRelease(t *testing.T) {
	root := testutil.RepoRoot(t)
	out := t.TempDir()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	cmd := exec.Command("make", "--no-print-directory", "release", "VERSION="+version, "RELEASE_DIR="+out, "RELEASE_PLATFORMS="+platform)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make release: %v\n%s", err, b)
	}

	install := testutil.ReadFile(t, filepath.Join(out, "install.yaml"))
	if !strings.Contains(install, "image: ghcr.io/deckhand-dev/deckhand:"+version+"\n") {
		t.Errorf("install.yaml does not pin the image to %s", version)
	}
	if strings.Contains(install, ":dev\n") {
		t.Errorf("install.yaml still names the :dev image")
	}

	chart := filepath.Join(out, "deckhand-"+strings.TrimPrefix(version, "v")+".tgz")
	meta := tarFile(t, chart, "deckhand/Chart.yaml")
	for _, want := range []string{"version: " + strings.TrimPrefix(version, "v") + "\n", "appVersion: " + version} {
		if !strings.Contains(meta, want) {
			t.Errorf("the packaged Chart.yaml lacks %q:\n%s", want, meta)
		}
	}

	archive := filepath.Join(out, "kubectl-deckhand_"+version+"_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz")
	plugin := filepath.Join(t.TempDir(), "kubectl-deckhand")
	if err := os.WriteFile(plugin, []byte(tarFile(t, archive, "kubectl-deckhand")), 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(plugin, "version").CombinedOutput(); err != nil || !strings.Contains(string(b), version) {
		t.Errorf("kubectl-deckhand version: %v, %q; want it to print %s", err, b, version)
	}
	tarFile(t, archive, "LICENSE")

	krew := testutil.ReadFile(t, filepath.Join(out, "deckhand.yaml"))
	if !strings.Contains(krew, "version: "+version) || strings.Contains(krew, "{{") {
		t.Errorf("the krew manifest is not filled in:\n%s", krew)
	}

	sums := testutil.ReadFile(t, filepath.Join(out, "SHA256SUMS"))
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, e := range entries {
		if e.Name() == "SHA256SUMS" {
			continue
		}
		sum := sha256.Sum256([]byte(testutil.ReadFile(t, filepath.Join(out, e.Name()))))
		if line := hex.EncodeToString(sum[:]) + "  " + e.Name(); !strings.Contains(sums, line+"\n") {
			t.Errorf("SHA256SUMS lacks %q", line)
		}
		if strings.HasSuffix(e.Name(), ".tar.gz") && !strings.Contains(krew, hex.EncodeToString(sum[:])) {
			t.Errorf("the krew manifest lacks the checksum of %s", e.Name())
		}
		listed++
	}
	if listed < 4 {
		t.Errorf("only %d artefacts written: %v", listed, entries)
	}
}

// TestKrewManifestCoversTheReleasePlatforms: the krew template has an entry
// for each platform `make release` builds by default (an entry the release
// did not build is dropped, so a missing one would go unnoticed), naming the
// binary as the archive holds it: kubectl-deckhand.exe on Windows.
func TestKrewManifestCoversTheReleasePlatforms(t *testing.T) {
	root := testutil.RepoRoot(t)
	m := regexp.MustCompile(`(?m)^RELEASE_PLATFORMS \?= (.+)$`).FindStringSubmatch(testutil.ReadFile(t, filepath.Join(root, "Makefile")))
	if m == nil {
		t.Fatal("the Makefile sets no default RELEASE_PLATFORMS")
	}
	var manifest struct {
		Spec struct {
			Platforms []struct {
				Selector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"selector"`
				Bin   string `json:"bin"`
				Files []struct {
					From string `json:"from"`
				} `json:"files"`
			} `json:"platforms"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(testutil.ReadFile(t, filepath.Join(root, "plugins", "krew", "deckhand.yaml"))), &manifest); err != nil {
		t.Fatal(err)
	}
	platforms := strings.Fields(m[1])
	if !slices.Contains(platforms, "windows/amd64") {
		t.Errorf("RELEASE_PLATFORMS %v has no windows/amd64, which docs/kubectl-plugin.md promises", platforms)
	}
	for _, platform := range platforms {
		goos, goarch, _ := strings.Cut(platform, "/")
		bin := "kubectl-deckhand"
		if goos == "windows" {
			bin += ".exe"
		}
		found := false
		for _, p := range manifest.Spec.Platforms {
			if p.Selector.MatchLabels["os"] != goos || p.Selector.MatchLabels["arch"] != goarch {
				continue
			}
			found = true
			if p.Bin != bin || len(p.Files) == 0 || p.Files[0].From != bin {
				t.Errorf("%s: bin %q, files %+v; want %s", platform, p.Bin, p.Files, bin)
			}
		}
		if !found {
			t.Errorf("the krew manifest has no entry for %s", platform)
		}
	}
}

// TestReleaseRefusesABadVersion: a version that is not vX.Y.Z stops the
// release before anything is written.
func TestReleaseRefusesABadVersion(t *testing.T) {
	root := testutil.RepoRoot(t)
	out := filepath.Join(t.TempDir(), "rel")
	cmd := exec.Command("make", "--no-print-directory", "release", "VERSION=1.2", "RELEASE_DIR="+out)
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "VERSION must look like v1.2.3") {
		t.Fatalf("make release VERSION=1.2: %v\n%s", err, b)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("%s was written", out)
	}
}

// tarFile returns the content of name in the gzipped tar archive.
func tarFile(t *testing.T, archive, name string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			t.Fatalf("%s has no %s", archive, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
}
