package testutil

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Kubectl runs the kubectl of binDir against the cluster of kubeconfig and
// returns its output; it fails t, with that output, if kubectl fails.
func Kubectl(t testing.TB, binDir, kubeconfig string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
