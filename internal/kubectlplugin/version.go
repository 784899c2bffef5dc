package kubectlplugin

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/deckhand-dev/deckhand/internal/version"
)

func newVersionCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			i := version.Get()
			_, err := fmt.Fprintf(o.streams.Out, "kubectl-deckhand %s (revision %s, %s)\n", i.Version, i.Revision, i.GoVersion)
			return err
		},
	}
}
