// Package kubectlplugin is kubectl-deckhand, the kubectl plugin for
// Deckhand: one file per subcommand, a cobra root built by NewRootCommand
// that cmd/kubectl-deckhand runs. The commands talk to the cluster through
// the kubeconfig flags kubectl itself takes (k8s.io/cli-runtime), so
// `kubectl deckhand --context x -n y ...` behaves as kubectl users expect.
package kubectlplugin
