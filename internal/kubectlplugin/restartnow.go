package kubectlplugin

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func newRestartNowCommand(o *options) *cobra.Command {
	var token string
	var ignoreWindows bool
	cmd := &cobra.Command{
		Use:   "restart-now RESTARTSCHEDULE",
		Short: "Ask a RestartSchedule for one run now, outside its schedule",
		Long: `restart-now sets the ` + deckhandv1alpha1.RestartScheduleRunNowAnnotation + ` annotation on the RestartSchedule
to a new token; the RestartSchedule controller starts one run per token. The run honours the
schedule's windows and blackout dates unless --ignore-windows sets the ` + deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation + `
annotation to the same token.`,
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
			// The override names the token it applies to and goes in the
			// same write, so the controller sees both at once.
			ann := map[string]string{deckhandv1alpha1.RestartScheduleRunNowAnnotation: token}
			if ignoreWindows {
				ann[deckhandv1alpha1.RestartScheduleRunNowIgnoreWindowsAnnotation] = token
			}
			path := []string{"metadata", "annotations"}
			if err := getAndSetField(cmd.Context(), c, client.ObjectKey{Namespace: ns, Name: args[0]}, &deckhandv1alpha1.RestartSchedule{}, path, ann); err != nil {
				return err
			}
			override := ""
			if ignoreWindows {
				override = ", ignoring windows and blackout dates"
			}
			_, err = fmt.Fprintf(o.streams.Out, "restartschedule/%s run requested (token %s%s)\n", args[0], token, override)
			return err
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "the run-now token (default: the current time, to the nanosecond); a token already used starts no new run")
	cmd.Flags().BoolVar(&ignoreWindows, "ignore-windows", false, "start the run even outside the RestartSchedule's windows or on a blackout date")
	return cmd
}

// runNowToken is a token unique to the moment it is made.
func runNowToken(now time.Time) string {
	return now.UTC().Format("20060102T150405.000000000Z")
}
