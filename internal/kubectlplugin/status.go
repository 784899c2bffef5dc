package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

func newStatusCommand(o *options) *cobra.Command {
	var follow bool
	var timeout time.Duration
	var output string
	cmd := &cobra.Command{
		Use:   "status KIND NAME [--watch [--timeout D]] [-o json|yaml]",
		Short: "Show a rollout by revision, a WebServer, or a RestartSchedule's candidates and runs; --watch waits until done",
		Long: `status prints a SidecarSet's (sidecarset, scs, sset) or PodSet's (podset, pset) rollout
with its pods by revision, a WebServer's (webserver, ws, mws) replicas, or a RestartSchedule's
(restartschedule, rsched) candidates and newest runs, each with its conditions; -o json or
-o yaml prints the object instead.

--watch follows the object until it is done (Ready True for the generation of its spec) or has
failed (a Stalled or Degraded condition True, or a progress deadline exceeded), printing a line
each time the reason changes, and exits 0 when done, 1 when failed, 2 when --timeout passed first.`,
		Example: "  kubectl deckhand status scs log-agent\n" +
			"  kubectl deckhand status pset web -n shop --watch --timeout 5m\n" +
			"  kubectl deckhand status ws front -n shop -o json\n" +
			"  kubectl deckhand status rsched nightly -n shop",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := parseKind(args[0], allKinds...)
			if err != nil {
				return err
			}
			var printer printers.ResourcePrinter
			if output != "" {
				if printer, err = objectPrinter(output); err != nil {
					return err
				}
			}
			ns, err := o.namespace()
			if err != nil {
				return err
			}
			ctx, name, out := cmd.Context(), args[1], o.streams.Out
			if follow || printer != nil {
				return o.statusObject(ctx, k, ns, name, follow, timeout, printer)
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			switch k {
			case kindSidecarSet:
				return sidecarSetStatus(ctx, c, out, name)
			case kindWebServer:
				return webServerStatus(ctx, c, out, ns, name)
			case kindRestartSchedule:
				return restartScheduleStatus(ctx, c, out, ns, name, time.Now())
			}
			return podSetStatus(ctx, c, out, ns, name)
		},
	}
	cmd.Flags().BoolVarP(&follow, "watch", "w", false, "follow the object until it is done (exit 0) or failed (exit 1)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with --watch: give up after this long (exit 2); 0 waits without limit")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: json or yaml (default: the summary)")
	return cmd
}

// statusObject prints the object with printer, after waiting until it is
// done or failed when follow is set. The lines of the wait go to standard
// error when printer is set, so that standard output stays parseable.
func (o *options) statusObject(ctx context.Context, k kind, ns, name string, follow bool, timeout time.Duration, printer printers.ResourcePrinter) error {
	ri, err := o.resourceClient(k, ns)
	if err != nil {
		return err
	}
	// A get first: a missing object is an error now, not a wait.
	obj, err := ri.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	var waitErr error
	if follow {
		lines := o.streams.Out
		if printer != nil {
			lines = o.streams.ErrOut
		}
		var last *unstructured.Unstructured
		if last, waitErr = waitSettled(ctx, ri, string(k)+"/"+name, name, timeout, lines); last != nil {
			obj = last
		}
	}
	if printer != nil {
		if err := printer.PrintObj(obj, o.streams.Out); err != nil {
			return err
		}
	}
	return waitErr
}

// revisionGroup is the pods that run one revision.
type revisionGroup struct {
	revision string
	note     string
	pods     []string
}

func sidecarSetStatus(ctx context.Context, c client.Client, out io.Writer, name string) error {
	s := &deckhandv1alpha1.SidecarSet{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, s); err != nil {
		return err
	}
	pods, err := selectedPods(ctx, c, s.Spec.Namespace, s.Spec.Selector)
	if err != nil {
		return err
	}
	// The injected pods are those whose record names the SidecarSet; the
	// revision is the one the record holds for it.
	byRevision := map[string][]string{}
	for i := range pods {
		rec := sidecarcontrol.ReadPodRecord(pods[i].Annotations)
		if !rec.Has(name) {
			continue
		}
		hash, _ := rec.Revisions(name)
		byRevision[hash] = append(byRevision[hash], pods[i].Namespace+"/"+pods[i].Name)
	}
	st := &s.Status
	fields := []string{
		"SidecarSet", s.Name,
		"Revision", orDash(st.LatestRevision),
		"Rollout", pausedWord(s.Spec.UpdateStrategy.Paused, string(s.Spec.UpdateStrategy.Type)),
		"Injection", pausedWord(s.Spec.InjectionStrategy.Paused, "active"),
		"Pods", fmt.Sprintf("matched %d, updated %d, ready %d, updated and ready %d, not injected %d, not updatable %d",
			st.MatchedPods, st.UpdatedPods, st.ReadyPods, st.UpdatedReadyPods, st.NotInjectedPods, st.NotUpdatablePods),
	}
	return printRolloutStatus(out, fields, groupByRevision(byRevision, st.LatestRevision, ""), s.Generation, st.ObservedGeneration, st.Conditions)
}

func podSetStatus(ctx context.Context, c client.Client, out io.Writer, ns, name string) error {
	p := &deckhandv1alpha1.PodSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
		return err
	}
	pods, err := selectedPods(ctx, c, ns, p.Spec.Selector)
	if err != nil {
		return err
	}
	byRevision := map[string][]string{}
	for i := range pods {
		if !metav1.IsControlledBy(&pods[i], p) {
			continue
		}
		rev := pods[i].Labels[deckhandv1alpha1.PodSetRevisionLabel]
		byRevision[rev] = append(byRevision[rev], pods[i].Name)
	}
	st := &p.Status
	fields := []string{
		"PodSet", p.Namespace + "/" + p.Name,
		"Revision", fmt.Sprintf("update %s, current %s", orDash(st.UpdateRevision), orDash(st.CurrentRevision)),
		"Paused", yesNo(p.Spec.Paused),
		"Replicas", fmt.Sprintf("desired %d, current %d, updated %d, ready %d, available %d, terminating %d",
			desiredReplicas(p.Spec.Replicas), st.Replicas, st.UpdatedReplicas, st.ReadyReplicas, st.AvailableReplicas, st.TerminatingReplicas),
	}
	return printRolloutStatus(out, fields, groupByRevision(byRevision, st.UpdateRevision, st.CurrentRevision), p.Generation, st.ObservedGeneration, st.Conditions)
}

func webServerStatus(ctx context.Context, c client.Client, out io.Writer, ns, name string) error {
	ws := &deckhandv1alpha1.WebServer{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, ws); err != nil {
		return err
	}
	st := &ws.Status
	if err := printFields(out,
		"WebServer", ws.Namespace+"/"+ws.Name,
		"Image", ws.Spec.Image,
		"URL", orDash(st.URL),
		"Replicas", fmt.Sprintf("desired %d, current %d, ready %d, available %d", desiredReplicas(ws.Spec.Replicas), st.Replicas, st.ReadyReplicas, st.AvailableReplicas),
	); err != nil {
		return err
	}
	return printConditions(out, ws.Generation, st.ObservedGeneration, st.Conditions)
}

// printRolloutStatus prints what status shows of a kind that rolls its pods
// out by revision: its fields (label, value, ...), its pods by revision and
// its conditions.
func printRolloutStatus(out io.Writer, fields []string, groups []revisionGroup, generation, observed int64, conds []metav1.Condition) error {
	if err := printFields(out, fields...); err != nil {
		return err
	}
	if err := printRevisions(out, groups); err != nil {
		return err
	}
	return printConditions(out, generation, observed, conds)
}

// selectedPods lists the pods selector matches, in namespace ns or, when
// ns is empty, in every namespace.
func selectedPods(ctx context.Context, c client.Client, ns string, selector *metav1.LabelSelector) ([]corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return nil, err
	}
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// groupByRevision orders the groups: the update revision first, then the
// current one, then the others by name.
func groupByRevision(byRevision map[string][]string, update, current string) []revisionGroup {
	groups := make([]revisionGroup, 0, len(byRevision))
	for rev, pods := range byRevision {
		sort.Strings(pods)
		g := revisionGroup{revision: rev, pods: pods}
		switch {
		case rev == "":
			g.revision, g.note = "-", "no revision recorded"
		case rev == update && current != "" && current != update:
			g.note = "update revision"
		case rev == update:
			g.note = "latest"
		case rev == current:
			g.note = "current revision"
		default:
			g.note = "old"
		}
		groups = append(groups, g)
	}
	rank := func(g revisionGroup) int {
		switch g.note {
		case "latest", "update revision":
			return 0
		case "current revision":
			return 1
		}
		return 2
	}
	sort.Slice(groups, func(i, j int) bool {
		if ri, rj := rank(groups[i]), rank(groups[j]); ri != rj {
			return ri < rj
		}
		return groups[i].revision < groups[j].revision
	})
	return groups
}

func printRevisions(out io.Writer, groups []revisionGroup) error {
	fmt.Fprintln(out, "\nPods by revision:")
	rows := make([]string, len(groups))
	for i, g := range groups {
		rows[i] = fmt.Sprintf("  %s (%s)\t%d\t%s", g.revision, g.note, len(g.pods), strings.Join(g.pods, ", "))
	}
	return printTable(out, "  (no pods)", "  REVISION\tPODS\tNAMES", rows)
}

// printConditions prints every condition, the summary ones (Ready,
// Reconciling, Stalled) first.
func printConditions(out io.Writer, generation, observed int64, conds []metav1.Condition) error {
	fmt.Fprintln(out, "\nConditions:")
	if observed != generation {
		fmt.Fprintf(out, "  (status is for generation %d; the spec is at generation %d)\n", observed, generation)
	}
	order := map[string]int{deckhandv1alpha1.ReadyCondition: 0, deckhandv1alpha1.ReconcilingCondition: 1, deckhandv1alpha1.StalledCondition: 2}
	sorted := append([]metav1.Condition(nil), conds...)
	sort.SliceStable(sorted, func(i, j int) bool {
		oi, ok := order[sorted[i].Type]
		if !ok {
			oi = len(order)
		}
		oj, ok := order[sorted[j].Type]
		if !ok {
			oj = len(order)
		}
		return oi < oj
	})
	rows := make([]string, len(sorted))
	for i, c := range sorted {
		rows[i] = fmt.Sprintf("  %s\t%s\t%s\t%s", c.Type, c.Status, c.Reason, c.Message)
	}
	return printTable(out, "  (none)", "  TYPE\tSTATUS\tREASON\tMESSAGE", rows)
}

// printFields prints "Label: value" lines, the values aligned; labelValues
// alternates labels and values.
func printFields(out io.Writer, labelValues ...string) error {
	w := printers.GetNewTabWriter(out)
	for i := 0; i+1 < len(labelValues); i += 2 {
		fmt.Fprintf(w, "%s:\t%s\n", labelValues[i], labelValues[i+1])
	}
	return w.Flush()
}

// desiredReplicas is a spec's replica count, defaulted as the API server
// does.
func desiredReplicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

func pausedWord(paused bool, otherwise string) string {
	if paused {
		return "paused"
	}
	return orDash(otherwise)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
