package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const generated = `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: manager-certs-role
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: manager-role
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: manager-certs-role
  namespace: deckhand-system
rules: []
`

// TestSplit: the named roles (a ClusterRole and a Role of one name) move to
// their file in order, the rest stay, and a name controller-gen did not
// generate is an error that writes nothing.
func TestSplit(t *testing.T) {
	dir := t.TempDir()
	src, certs := filepath.Join(dir, "role.yaml"), filepath.Join(dir, "certs.yaml")
	if err := os.WriteFile(src, []byte(generated), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{src, "manager-certs-role=" + certs}); err != nil {
		t.Fatal(err)
	}
	kept, _ := os.ReadFile(src)
	moved, _ := os.ReadFile(certs)
	if strings.Contains(string(kept), "manager-certs-role") || !strings.Contains(string(kept), "name: manager-role") {
		t.Errorf("role.yaml kept:\n%s", kept)
	}
	if strings.Count(string(moved), "name: manager-certs-role") != 2 || strings.Index(string(moved), "kind: ClusterRole") > strings.Index(string(moved), "kind: Role") {
		t.Errorf("certs.yaml got:\n%s", moved)
	}
	if err := os.WriteFile(src, []byte(generated), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{src, "manager-renamed-role=" + filepath.Join(dir, "x.yaml")}); err == nil || !strings.Contains(err.Error(), "manager-renamed-role") {
		t.Errorf("a role not generated: err %v, want one naming it", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.yaml")); !os.IsNotExist(err) {
		t.Errorf("a failed split wrote a file (%v)", err)
	}
}
