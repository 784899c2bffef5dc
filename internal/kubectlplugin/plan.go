package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/sidecarset"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// maxPlanFileBytes bounds the manifest plan reads: a SidecarSet is far
// smaller, and the API server refuses objects over 1.5 MiB anyway.
const maxPlanFileBytes = 3 << 20

type planOptions struct {
	file, output, deckhandNamespace string
}

func newPlanCommand(o *options) *cobra.Command {
	po := planOptions{}
	cmd := &cobra.Command{
		Use:   "plan -f SIDECARSET_OR_PODSET.yaml",
		Short: "Show what applying a SidecarSet or PodSet change would do to running pods, writing nothing",
		Long: `plan reads a SidecarSet manifest, compares it with the SidecarSet of that name
in the cluster, and prints what the SidecarSet controller would do to every pod
the SidecarSet selects once the manifest is applied: update it in place, resize
it, recreate it (updateStrategy.recreate: Evict), or leave it alone and why
(partition, update selector, maxUnavailable used up by pods unavailable for
other reasons, no controller to recreate it, not injected). Pods are listed in
the order the rollout acts on them, with the pass (step) that acts on each;
each pass waits for the pods of the one before to run the new revision. A ready
pod is updated only while the PodDisruptionBudgets covering it allow a
disruption, as the controller does.

The plan is computed by the controller's own classification and planner, from
the pods as they are now; it writes nothing. It reads the SidecarSet, the
namespaces, the selected pods, their PodDisruptionBudgets and the SidecarSet's ControllerRevisions in
Deckhand's namespace (without them, a pod behind only in run-once init
containers reads as needing recreation). Namespaces the manager was told to
protect with --protected-namespaces beyond the defaults are not known here.

For a PodSet manifest (-n or its metadata.namespace), plan lists the syncs the
PodSet controller would make, by its own planner: the pods each creates, and
which existing pods are updated in place, recreated or scaled down at which
sync, each sync waiting for the pods of the one before to be available.`,
		Example: "  kubectl deckhand plan -f logging-sidecarset.yaml\n  kubectl deckhand plan -f logging-sidecarset.yaml -o json\n  kubectl deckhand plan -f web-podset.yaml -n shop",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			data, kind, err := readManifest(po.file, o.streams.In)
			if err != nil {
				return err
			}
			if kind == "PodSet" {
				return planPodSet(cmd.Context(), o, c, po, data)
			}
			next, err := decodeStrict[deckhandv1alpha1.SidecarSet](po.file, data)
			if err != nil {
				return err
			}
			in, current, warnings, err := gatherPlan(cmd.Context(), c, next, po.deckhandNamespace)
			if err != nil {
				return err
			}
			for _, w := range warnings {
				fmt.Fprintln(o.streams.ErrOut, "Warning:", w)
			}
			preview := sidecarset.Preview(in)
			if po.output == "json" {
				enc := json.NewEncoder(o.streams.Out)
				enc.SetIndent("", "  ")
				return enc.Encode(preview)
			}
			return printPlan(o.streams.Out, next.Name, current, preview)
		},
	}
	cmd.Flags().StringVarP(&po.file, "filename", "f", "", "the SidecarSet manifest (- for standard input)")
	cmd.Flags().StringVarP(&po.output, "output", "o", "", "output format: empty for a table, or json")
	cmd.Flags().StringVar(&po.deckhandNamespace, "deckhand-namespace", podutil.DeckhandNamespace, "the namespace Deckhand runs in (SidecarSets' ControllerRevisions live there)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// readManifest reads the manifest at path (- for stdin) and says whether
// it is a SidecarSet or a PodSet of this API version.
func readManifest(path string, stdin io.Reader) ([]byte, string, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, "", err
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxPlanFileBytes+1))
	if err != nil {
		return nil, "", err
	}
	if len(data) > maxPlanFileBytes {
		return nil, "", fmt.Errorf("%s: larger than %d bytes", path, maxPlanFileBytes)
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	if gv := deckhandv1alpha1.GroupVersion.String(); tm.APIVersion != gv || (tm.Kind != "SidecarSet" && tm.Kind != "PodSet") {
		return nil, "", fmt.Errorf("%s: apiVersion %q, kind %q: want %s, SidecarSet or PodSet (one object)", path, tm.APIVersion, tm.Kind, gv)
	}
	return data, tm.Kind, nil
}

// decodeStrict decodes a manifest, refusing unknown fields so that a
// misspelt field is named rather than silently dropped.
func decodeStrict[T any, P interface {
	*T
	GetName() string
}](path string, data []byte) (P, error) {
	obj := P(new(T))
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if obj.GetName() == "" {
		return nil, fmt.Errorf("%s: metadata.name: Required value", path)
	}
	return obj, nil
}

// gatherPlan reads what the preview of next needs: the SidecarSet as it is
// (nil if it does not exist yet), the namespaces, the pods the selector
// selects, and the SidecarSet's revisions.
func gatherPlan(ctx context.Context, c client.Client, next *deckhandv1alpha1.SidecarSet, deckhandNS string) (sidecarset.PreviewInput, *deckhandv1alpha1.SidecarSet, []string, error) {
	var warnings []string
	current := &deckhandv1alpha1.SidecarSet{}
	switch err := c.Get(ctx, client.ObjectKey{Name: next.Name}, current); {
	case apierrors.IsNotFound(err):
		current = nil
	case err != nil:
		return sidecarset.PreviewInput{}, nil, nil, err
	}
	proposed := next.DeepCopy()
	if current != nil {
		proposed = current.DeepCopy()
		proposed.Spec = next.Spec
	}
	// A generation the API server never gave: the Lister compiles it afresh.
	proposed.Generation = 0
	in := sidecarset.PreviewInput{Set: proposed, Now: time.Now()}
	var nsList corev1.NamespaceList
	if err := c.List(ctx, &nsList); err != nil {
		return in, nil, nil, fmt.Errorf("listing namespaces (a namespaceSelector needs their labels): %w", err)
	}
	namespaces := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, nil)
	for i := range nsList.Items {
		if err := namespaces.Add(&nsList.Items[i]); err != nil {
			return in, nil, nil, err
		}
	}
	sets := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers())
	in.Lister = sidecarcontrol.NewLister(sets, namespaces, sidecarcontrol.Options{Namespace: deckhandNS})
	if proposed.Spec.Selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(proposed.Spec.Selector)
		if err != nil {
			return in, nil, nil, fmt.Errorf("spec.selector: %w", err)
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(proposed.Spec.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return in, nil, nil, err
		}
		for i := range pods.Items {
			in.Pods = append(in.Pods, &pods.Items[i])
		}
	}
	budgets, err := disruptionBudgetsOf(ctx, c, in.Pods)
	switch {
	case apierrors.IsForbidden(err):
		warnings = append(warnings, "cannot read PodDisruptionBudgets: the plan does not know which ones would hold pods back")
	case err != nil:
		return in, nil, nil, err
	}
	in.DisruptionBudgets = budgets
	if current != nil {
		revs, err := runningRevisions(ctx, c, current, deckhandNS)
		switch {
		case apierrors.IsForbidden(err):
			warnings = append(warnings, fmt.Sprintf("cannot read ControllerRevisions in %s: pods behind only in run-once init containers read as needing recreation", deckhandNS))
		case err != nil:
			return in, nil, nil, err
		}
		in.Revisions = revs
	}
	return in, current, warnings, nil
}

// disruptionBudgetsOf lists the PodDisruptionBudgets of the pods'
// namespaces.
func disruptionBudgetsOf(ctx context.Context, c client.Client, pods []*corev1.Pod) (map[string][]policyv1.PodDisruptionBudget, error) {
	out := map[string][]policyv1.PodDisruptionBudget{}
	for _, p := range pods {
		if _, done := out[p.Namespace]; done {
			continue
		}
		var list policyv1.PodDisruptionBudgetList
		if err := c.List(ctx, &list, client.InNamespace(p.Namespace)); err != nil {
			return nil, err
		}
		out[p.Namespace] = list.Items
	}
	return out, nil
}

// runningRevisions returns the running hashes of s's ControllerRevisions,
// by revision hash, as the controller's revision cache keeps them: a hash
// two revisions of different content carry is left out.
func runningRevisions(ctx context.Context, c client.Client, s *deckhandv1alpha1.SidecarSet, ns string) (map[string]sidecarcontrol.RunningRevision, error) {
	var list appsv1.ControllerRevisionList
	if err := c.List(ctx, &list, client.InNamespace(ns),
		client.MatchingLabels{deckhandv1alpha1.SidecarSetNameLabel: sidecarcontrol.NameLabelValue(s.Name)}); err != nil {
		return nil, err
	}
	out := map[string]sidecarcontrol.RunningRevision{}
	collided := map[string]bool{}
	for i := range list.Items {
		cr := &list.Items[i]
		hash := cr.Labels[deckhandv1alpha1.SidecarSetRevisionLabel]
		if ref := metav1.GetControllerOfNoCopy(cr); ref == nil || ref.UID != s.UID || hash == "" || collided[hash] {
			continue
		}
		spec, err := sidecarcontrol.DecodeRevision(cr)
		if err != nil {
			continue
		}
		running := sidecarcontrol.RunningRevisionOf(spec)
		if seen, ok := out[hash]; ok && seen != running {
			delete(out, hash)
			collided[hash] = true
			continue
		}
		out[hash] = running
	}
	return out, nil
}

func printPlan(out io.Writer, name string, current *deckhandv1alpha1.SidecarSet, p sidecarset.RolloutPreview) error {
	from := "does not exist yet"
	if current != nil {
		hash, _ := sidecarcontrol.Hashes(&current.Spec)
		from = "now at revision " + hash
		if hash == p.Revision {
			from += ", unchanged"
		}
	}
	fmt.Fprintf(out, "SidecarSet %s: revision %s (%s); maxUnavailable %d, partition %d; %d step(s)\n",
		name, p.Revision, from, p.MaxUnavailable, p.Partition, p.Steps)
	if p.Held != "" {
		fmt.Fprintf(out, "Held: %s; the steps below run once that changes\n", p.Held)
	}
	rows := make([]string, 0, len(p.Pods))
	for _, pod := range p.Pods {
		step := "-"
		if pod.Step > 0 {
			step = strconv.Itoa(pod.Step)
		}
		rows = append(rows, fmt.Sprintf("%s\t%s/%s\t%s\t%s", step, pod.Namespace, pod.Name, pod.Action, pod.Why))
	}
	return printTable(out, "No pods are selected.", "STEP\tPOD\tACTION\tWHY", rows)
}
