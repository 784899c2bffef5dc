package localcluster

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

// podContainerRestartStages are the Stage objects that make kwok's fake
// nodes restart a container whose image changed, as a kubelet does; see the
// file for what they emulate.
//
//go:embed kwokstages/pod-container-restart.yaml
var podContainerRestartStages []byte

// writeKwokStages writes the Stage configuration kwok runs with into the
// cluster directory: kwok's own node and pod lifecycle (built into BinDir by
// hack/k8s/build.sh from the pinned kwok module) followed by Deckhand's
// in-place container restart.
func (c *Cluster) writeKwokStages() (string, error) {
	stock, err := os.ReadFile(filepath.Join(c.opts.BinDir, "kwok-stages.yaml"))
	if err != nil {
		return "", fmt.Errorf("kwok stages: %w", err)
	}
	path := filepath.Join(c.dir, "kwok-stages.yaml")
	data := append(append(stock, "\n---\n"...), podContainerRestartStages...)
	return path, os.WriteFile(path, data, 0o600)
}
