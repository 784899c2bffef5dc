package kubectlplugin

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func newRestartNowCommand(o *options) *cobra.Command {
	var token string
	cmd := &cobra.Command{
		Use:   "restart-now RESTARTSCHEDULE",
		Short: "Ask a RestartSchedule for one run now, outside its schedule",
		Long: `restart-now sets the ` + deckhandv1alpha1.RestartScheduleRunNowAnnotation + ` annotation on the RestartSchedule
to a new token; the RestartSchedule controller starts one run per token.`,
		Example: "  kubectl deckhand restart-now nightly -n shop\n  kubectl deckhand restart-now nightly --token before-maintenance",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.namespacedClient()
			if err != nil {
				return err
			}
			if token == "" {
				token = runNowToken(time.Now())
			}
			body, err := mergePatch([]string{"metadata", "annotations", deckhandv1alpha1.RestartScheduleRunNowAnnotation}, token)
			if err != nil {
				return err
			}
			rs := &deckhandv1alpha1.RestartSchedule{}
			rs.Namespace, rs.Name = ns, args[0]
			// Get first: a merge patch of a missing object fails with a
			// less helpful message than the NotFound of a get.
			if err := c.Get(cmd.Context(), client.ObjectKeyFromObject(rs), rs); err != nil {
				return err
			}
			if err := c.Patch(cmd.Context(), rs, client.RawPatch(types.MergePatchType, body)); err != nil {
				return err
			}
			_, err = fmt.Fprintf(o.streams.Out, "restartschedule/%s run requested (token %s)\n", args[0], token)
			return err
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the run-now token (default: the current time, to the nanosecond); a token already used starts no new run")
	return cmd
}

// runNowToken is a token unique to the moment it is made.
func runNowToken(now time.Time) string {
	return now.UTC().Format("20060102T150405.000000000Z")
}
