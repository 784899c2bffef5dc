package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

func newWhyCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "why POD",
		Short: "Explain which SidecarSets injected a pod, and why the others did not",
		Long: `why lists every SidecarSet with whether it selects the pod (by the rules the
pod webhook applies), whether it injected the pod and at which revision, and for
every SidecarSet that did not inject it, the reason. It also names the pod's
owner and, for a PodSet's pod, the PodSet revision the pod runs.`,
		Example: "  kubectl deckhand why web-7f9c5 -n shop",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := o.namespacedClient()
			if err != nil {
				return err
			}
			in, err := gatherWhy(cmd.Context(), c, ns, args[0])
			if err != nil {
				return err
			}
			return printWhy(o.streams.Out, explain(in))
		},
	}
}

// whyInput is everything explain looks at.
type whyInput struct {
	Pod *corev1.Pod
	// Namespace is the pod's namespace, nil when it could not be read
	// (a namespaceSelector then matches nothing, as in the webhook).
	Namespace   *corev1.Namespace
	SidecarSets []deckhandv1alpha1.SidecarSet
	// PodSet is the PodSet that controls the pod, nil when none does or it
	// is gone.
	PodSet *deckhandv1alpha1.PodSet
}

func gatherWhy(ctx context.Context, c client.Client, ns, name string) (whyInput, error) {
	in := whyInput{Pod: &corev1.Pod{}}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, in.Pod); err != nil {
		return in, err
	}
	nsObj := &corev1.Namespace{}
	switch err := c.Get(ctx, client.ObjectKey{Name: ns}, nsObj); {
	case err == nil:
		in.Namespace = nsObj
	case !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err):
		return in, err
	}
	var sets deckhandv1alpha1.SidecarSetList
	if err := c.List(ctx, &sets); err != nil {
		return in, err
	}
	in.SidecarSets = sets.Items
	if ref := metav1.GetControllerOf(in.Pod); ref != nil && isPodSetRef(ref) {
		ps := &deckhandv1alpha1.PodSet{}
		switch err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, ps); {
		case err == nil && ps.UID == ref.UID:
			in.PodSet = ps
		case err != nil && !apierrors.IsNotFound(err):
			return in, err
		}
	}
	return in, nil
}

func isPodSetRef(ref *metav1.OwnerReference) bool {
	return ref.Kind == "PodSet" && strings.HasPrefix(ref.APIVersion, deckhandv1alpha1.GroupVersion.Group+"/")
}

// whyReport is explain's answer.
type whyReport struct {
	Pod string
	// Owner says who controls the pod and, for a PodSet, at which revision.
	Owner    string
	Verdicts []verdict
}

// verdict is what one SidecarSet did with the pod.
type verdict struct {
	SidecarSet string
	Matches    bool
	Injected   bool
	// Why is one line: the revision injected, or why the pod is not injected.
	Why string
}

// explain says, for every SidecarSet, whether it selects the pod and
// whether it injected it, and why not. Selection is decided by the
// sidecarcontrol.Lister the pod webhook uses, over the objects in in; the
// breakdown of a non-match only names the rule that failed.
func explain(in whyInput) whyReport {
	pod := in.Pod
	rep := whyReport{Pod: pod.Namespace + "/" + pod.Name, Owner: describeOwner(pod, in.PodSet)}
	setIdx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers())
	nsIdx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	if in.Namespace != nil {
		_ = nsIdx.Add(in.Namespace)
	}
	sets := make([]*deckhandv1alpha1.SidecarSet, len(in.SidecarSets))
	for i := range in.SidecarSets {
		sets[i] = &in.SidecarSets[i]
		_ = setIdx.Add(sets[i])
	}
	sort.Slice(sets, func(i, j int) bool { return sets[i].Name < sets[j].Name })
	lister := sidecarcontrol.NewLister(setIdx, nsIdx, sidecarcontrol.Options{})
	record := sidecarcontrol.ReadPodRecord(pod.Annotations)
	for _, s := range sets {
		c := lister.Compiled(s)
		v := verdict{SidecarSet: s.Name, Matches: s.DeletionTimestamp == nil && lister.Matches(s, pod.Namespace, pod.Labels), Injected: record.Has(s.Name)}
		switch {
		case v.Injected:
			v.Why = injectedRevision(record, s, c, v.Matches)
		case !v.Matches:
			v.Why = whyNoMatch(s, c, pod, lister)
		default:
			v.Why = whyNotInjected(s, c, pod, record, sets)
		}
		rep.Verdicts = append(rep.Verdicts, v)
	}
	return rep
}

// injectedRevision describes the revision the pod records for s.
func injectedRevision(record sidecarcontrol.PodRecord, s *deckhandv1alpha1.SidecarSet, c *sidecarcontrol.Compiled, matches bool) string {
	hash, _ := record.Revisions(s.Name)
	var b strings.Builder
	if hash == "" {
		b.WriteString("injected; the pod records no revision for it")
	} else {
		fmt.Fprintf(&b, "injected at revision %s", hash)
		if hash == c.Hash {
			b.WriteString(" (the current revision)")
		} else {
			fmt.Fprintf(&b, " (not the current revision %s", c.Hash)
			if s.Spec.UpdateStrategy.Paused {
				b.WriteString("; the rollout is paused")
			}
			b.WriteString(")")
		}
	}
	if names := record.Containers(s.Name); len(names) > 0 {
		fmt.Fprintf(&b, ", containers %s", strings.Join(names, ","))
	}
	if !matches {
		b.WriteString("; the SidecarSet no longer selects the pod")
	}
	return b.String()
}

// whyNoMatch names the first selection rule s fails for pod, in the order
// the webhook applies them.
func whyNoMatch(s *deckhandv1alpha1.SidecarSet, c *sidecarcontrol.Compiled, pod *corev1.Pod, lister *sidecarcontrol.Lister) string {
	ns := pod.Namespace
	switch {
	case s.DeletionTimestamp != nil:
		return "the SidecarSet is being deleted"
	case lister.NamespaceOptsOut(ns):
		return fmt.Sprintf("namespace %s opts out of every SidecarSet (label %s=%s)", ns,
			deckhandv1alpha1.SidecarSetInjectionLabel, deckhandv1alpha1.SidecarSetInjectionDisabled)
	case lister.IsProtectedNamespace(ns):
		return fmt.Sprintf("namespace %s is protected: no SidecarSet reaches its pods", ns)
	case s.Spec.Namespace != "" && s.Spec.Namespace != ns:
		return fmt.Sprintf("other namespace: the SidecarSet is limited to namespace %s", s.Spec.Namespace)
	case !c.MatchesNamespace(s, ns, lister.NamespaceLabels):
		if _, known := lister.NamespaceLabels(ns); !known {
			return fmt.Sprintf("namespaceSelector %s: the labels of namespace %s could not be read", c.NamespaceSelector, ns)
		}
		return fmt.Sprintf("namespaceSelector %s does not match namespace %s", c.NamespaceSelector, ns)
	}
	reqs, selectable := c.Selector.Requirements()
	if !selectable || len(reqs) == 0 {
		return "the selector is empty or invalid: it selects no pod"
	}
	podLabels := labels.Set(pod.Labels)
	for _, r := range reqs {
		if r.Matches(podLabels) {
			continue
		}
		if v, ok := pod.Labels[r.Key()]; ok {
			return fmt.Sprintf("selector does not match: %s is required, the pod has %s=%s", r.String(), r.Key(), v)
		}
		return fmt.Sprintf("selector does not match: %s is required, the pod has no label %s", r.String(), r.Key())
	}
	return "the SidecarSet does not select the pod"
}

// whyNotInjected explains why s, which selects pod, did not inject it: the
// rules of the pod webhook, then the circumstances of the pod's creation.
func whyNotInjected(s *deckhandv1alpha1.SidecarSet, c *sidecarcontrol.Compiled, pod *corev1.Pod, record sidecarcontrol.PodRecord, sets []*deckhandv1alpha1.SidecarSet) string {
	if sidecarcontrol.OptedOut(s, pod.Annotations) {
		return fmt.Sprintf("the pod carries %s=true and the SidecarSet allows opting out (spec.injectionStrategy.allowOptOut)", deckhandv1alpha1.SidecarSetSkipInjectionAnnotation)
	}
	if pod.CreationTimestamp.Before(&s.CreationTimestamp) {
		return fmt.Sprintf("the pod was created (%s) before the SidecarSet (%s): injection happens only when a pod is created",
			pod.CreationTimestamp.UTC().Format(time.RFC3339), s.CreationTimestamp.UTC().Format(time.RFC3339))
	}
	if s.Spec.InjectionStrategy.Paused {
		return "injection is paused (spec.injectionStrategy.paused)"
	}
	for _, name := range c.ContainerNames {
		if !podutil.HasContainer(pod, name) {
			continue
		}
		for _, other := range sets {
			if other.Name != s.Name && record.Has(other.Name) && slices.Contains(record.Containers(other.Name), name) {
				return fmt.Sprintf("container name clash: SidecarSet %s injected a container named %q first", other.Name, name)
			}
		}
		return fmt.Sprintf("container name clash: the pod already has a container named %q", name)
	}
	return fmt.Sprintf("not injected although selected: the pod was created while the pod webhook was unavailable or injection was paused "+
		"(the SidecarSet counts %d such pod(s) in status.notInjectedPods); recreate the pod to inject it", s.Status.NotInjectedPods)
}

// describeOwner names the pod's controller and, for a PodSet, the revision
// the pod runs compared with the PodSet's.
func describeOwner(pod *corev1.Pod, ps *deckhandv1alpha1.PodSet) string {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return "none (no controller)"
	}
	owner := fmt.Sprintf("%s %s", ref.Kind, ref.Name)
	if !isPodSetRef(ref) {
		return owner + " (not a PodSet)"
	}
	if ps == nil {
		return owner + " (the PodSet no longer exists)"
	}
	rev := pod.Labels[deckhandv1alpha1.PodSetRevisionLabel]
	switch rev {
	case "":
		return owner + ", the pod carries no revision label"
	case ps.Status.UpdateRevision:
		return fmt.Sprintf("%s, at revision %s (the update revision)", owner, rev)
	case ps.Status.CurrentRevision:
		return fmt.Sprintf("%s, at revision %s (the current revision; the update revision is %s)", owner, rev, orDash(ps.Status.UpdateRevision))
	}
	return fmt.Sprintf("%s, at revision %s (an old revision; the update revision is %s)", owner, rev, orDash(ps.Status.UpdateRevision))
}

func printWhy(out io.Writer, rep whyReport) error {
	fmt.Fprintf(out, "Pod:    %s\nOwner:  %s\n\n", rep.Pod, rep.Owner)
	rows := make([]string, len(rep.Verdicts))
	for i, v := range rep.Verdicts {
		rows[i] = fmt.Sprintf("%s\t%s\t%s\t%s", v.SidecarSet, yesNo(v.Matches), yesNo(v.Injected), v.Why)
	}
	return printTable(out, "No SidecarSets exist.", "SIDECARSET\tSELECTS\tINJECTED\tWHY", rows)
}
