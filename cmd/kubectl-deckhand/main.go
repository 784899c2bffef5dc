// Command kubectl-deckhand is Deckhand's kubectl plugin (`kubectl deckhand
// ...` once on PATH). The commands live in internal/kubectlplugin.
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	_ "k8s.io/client-go/plugin/pkg/client/auth"

	"github.com/deckhand-dev/deckhand/internal/kubectlplugin"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := kubectlplugin.NewRootCommand(streams).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		// status --watch tells a failed rollout (1) from a timeout (2).
		os.Exit(kubectlplugin.ExitCode(err))
	}
}
