package kubectlplugin

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func newHistoryCommand(o *options) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "history RESTARTSCHEDULE",
		Short:   "Show a RestartSchedule's run history, newest first",
		Example: "  kubectl deckhand history nightly -n shop\n  kubectl deckhand history nightly -o yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "yaml" && output != "json" {
				return fmt.Errorf("unknown output format %q: expected yaml or json", output)
			}
			c, ns, err := o.namespacedClient()
			if err != nil {
				return err
			}
			rs := &deckhandv1alpha1.RestartSchedule{}
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: args[0]}, rs); err != nil {
				return err
			}
			return printHistory(o.streams.Out, output, newestFirst(rs.Status.History))
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: yaml or json (default: a table)")
	return cmd
}

// newestFirst sorts a copy of history by scheduled time, newest first. The
// controller keeps it in that order already; sorting keeps the table right
// whatever wrote the status.
func newestFirst(history []deckhandv1alpha1.RestartRecord) []deckhandv1alpha1.RestartRecord {
	out := slices.Clone(history)
	slices.SortStableFunc(out, func(a, b deckhandv1alpha1.RestartRecord) int {
		return b.ScheduledTime.Compare(a.ScheduledTime.Time)
	})
	return out
}

func printHistory(out io.Writer, format string, history []deckhandv1alpha1.RestartRecord) error {
	if history == nil {
		history = []deckhandv1alpha1.RestartRecord{}
	}
	switch format {
	case "json":
		b, err := json.MarshalIndent(history, "", "    ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	case "yaml":
		b, err := yaml.Marshal(history)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	rows := make([]string, len(history))
	for i, r := range history {
		rows[i] = fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", timestamp(&r.ScheduledTime), orDash(r.Workload), r.Result, timestamp(r.StartTime), timestamp(r.CompletionTime), r.Message)
	}
	return printTable(out, "No runs recorded.", "SCHEDULED\tWORKLOAD\tRESULT\tSTARTED\tCOMPLETED\tMESSAGE", rows)
}

// timestamp renders a time as RFC 3339 in UTC, "-" when unset.
func timestamp(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
