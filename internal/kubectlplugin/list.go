package kubectlplugin

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
)

// listOptions are list's flags.
type listOptions struct {
	*options
	allNamespaces bool
	output        string
}

func newListCommand(o *options) *cobra.Command {
	l := &listOptions{options: o}
	cmd := &cobra.Command{
		Use:   "list [KIND...] [-A] [-o json|yaml]",
		Short: "List Deckhand's objects of every kind (or of the kinds named) with how ready each is",
		Long: `list prints one row per SidecarSet, PodSet, WebServer and RestartSchedule of the namespace
(-n, else the context's; -A: every namespace), or of the kinds named. SidecarSets are
cluster-scoped and listed whatever the namespace.

READY counts pods: a PodSet's and WebServer's ready replicas of those desired, a SidecarSet's
updated and ready pods of those it matched. STATUS is what status --watch would decide now:
Ready, Failed or InProgress, with the REASON of the condition that decided it.`,
		Example: "  kubectl deckhand list -n shop\n  kubectl deckhand list pset ws -A\n  kubectl deckhand list -A -o json",
		RunE:    func(cmd *cobra.Command, args []string) error { return l.run(cmd.Context(), args) },
	}
	cmd.Flags().BoolVarP(&l.allNamespaces, "all-namespaces", "A", false, "list the objects of every namespace")
	cmd.Flags().StringVarP(&l.output, "output", "o", "", "output format: json or yaml (a List of the objects; default: a table)")
	return cmd
}

// run lists the objects of the kinds named (every kind when none is).
func (l *listOptions) run(ctx context.Context, args []string) error {
	var printer printers.ResourcePrinter
	if l.output != "" {
		var err error
		if printer, err = objectPrinter(l.output); err != nil {
			return err
		}
	}
	kinds := allKinds
	if len(args) > 0 {
		kinds = make([]kind, len(args))
		for i, a := range args {
			k, err := parseKind(a, allKinds...)
			if err != nil {
				return err
			}
			kinds[i] = k
		}
	}
	ns, err := l.namespace()
	if err != nil {
		return err
	}
	if l.allNamespaces {
		ns = ""
	}
	var items []unstructured.Unstructured
	for _, k := range kinds {
		ri, err := l.resourceClient(k, ns)
		if err != nil {
			return err
		}
		list, err := ri.List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing %ss: %w", k, err)
		}
		items = append(items, list.Items...)
	}
	if printer != nil {
		list := &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "v1", "kind": "List"}, Items: items}
		return printer.PrintObj(list, l.streams.Out)
	}
	return printTable(l.streams.Out, "No Deckhand objects found.", "KIND\tNAMESPACE\tNAME\tREADY\tSTATUS\tREASON\tAGE", listRows(items, time.Now()))
}

// listRows are the table rows of items, in the order given.
func listRows(items []unstructured.Unstructured, now time.Time) []string {
	rows := make([]string, len(items))
	for i := range items {
		u := &items[i]
		v := judge(u)
		age := duration.HumanDuration(now.Sub(u.GetCreationTimestamp().Time))
		rows[i] = fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", u.GetKind(), orDash(u.GetNamespace()), u.GetName(), readyCount(u), v.word(), v.reason, age)
	}
	return rows
}

// readyCount is the READY column: ready of desired for the kinds that run
// replicas, updated and ready of matched for a SidecarSet.
func readyCount(u *unstructured.Unstructured) string {
	count := func(fields ...string) int64 {
		n, _, _ := unstructured.NestedInt64(u.Object, fields...)
		return n
	}
	switch u.GetKind() {
	case "SidecarSet":
		return fmt.Sprintf("%d/%d", count("status", "updatedReadyPods"), count("status", "matchedPods"))
	case "PodSet", "WebServer":
		desired, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		if !found {
			desired = 1
		}
		return fmt.Sprintf("%d/%d", count("status", "readyReplicas"), desired)
	}
	return "-"
}
