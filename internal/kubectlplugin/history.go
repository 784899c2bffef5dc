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
		Use:   "history [restartschedule|rsched|podset|pset] NAME [-o yaml|json]",
		Short: "Show a RestartSchedule's run history, newest first, or a PodSet's revisions with their images",
		Long: `history prints a RestartSchedule's runs, newest first (the kind may be left out), or a
PodSet's revisions, oldest first as kubectl rollout history lists them: each ControllerRevision
the PodSet controls with its number, when it was created, its revision hash, the images of its
template, and which is the update and the current revision. rollback --to-revision takes the
number.`,
		Example: "  kubectl deckhand history nightly -n shop\n  kubectl deckhand history nightly -o yaml\n  kubectl deckhand history pset web -n shop",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "" && output != "yaml" && output != "json" {
				return fmt.Errorf("unknown output format %q: expected yaml or json", output)
			}
			k, name := kindRestartSchedule, args[0]
			if len(args) == 2 {
				var err error
				if k, err = parseKind(args[0], kindRestartSchedule, kindPodSet); err != nil {
					return err
				}
				name = args[1]
			}
			c, ns, err := o.namespacedClient()
			if err != nil {
				return err
			}
			if k == kindPodSet {
				revs, err := podSetHistory(cmd.Context(), c, ns, name)
				if err != nil {
					return err
				}
				return printPodSetHistory(o.streams.Out, output, revs)
			}
			rs := &deckhandv1alpha1.RestartSchedule{}
			if err := c.Get(cmd.Context(), client.ObjectKey{Namespace: ns, Name: name}, rs); err != nil {
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
	if format != "" {
		return printData(out, format, history)
	}
	rows := make([]string, len(history))
	for i, r := range history {
		rows[i] = fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", timestamp(&r.ScheduledTime), orDash(r.Workload), r.Result, timestamp(r.StartTime), timestamp(r.CompletionTime), r.Message)
	}
	return printTable(out, "No runs recorded.", "SCHEDULED\tWORKLOAD\tRESULT\tSTARTED\tCOMPLETED\tMESSAGE", rows)
}

// printData prints v as JSON (indented) or YAML.
func printData(out io.Writer, format string, v any) error {
	if format == "yaml" {
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	}
	b, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

// timestamp renders a time as RFC 3339 in UTC, "-" when unset.
func timestamp(t *metav1.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}
