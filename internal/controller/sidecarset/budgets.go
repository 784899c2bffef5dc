package sidecarset

import (
	"context"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A rollout reads the PodDisruptionBudgets of the namespaces it updates pods
// in, from the cache.
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=list;watch,roleName=manager-sidecarset-role

// disruptionBudgets are the PodDisruptionBudgets that cover the pods of a
// rollout pass, each with the disruptions it still allows in the pass. An
// in-place update restarts a ready pod's sidecar: a disruption, so a ready
// pod is updated only while every budget covering it allows one more, as an
// eviction would be admitted. A nil *disruptionBudgets allows everything.
type disruptionBudgets struct {
	byNamespace map[string][]*disruptionBudget
}

type disruptionBudget struct {
	name     string
	selector labels.Selector
	allowed  int32
}

// newDisruptionBudgets reads, with list, the budgets of the namespaces of
// the pods a pass may update (those behind the latest revision). A budget
// whose selector is empty or does not parse covers nothing, as for the
// disruption controller.
func newDisruptionBudgets(pods []*podState, list func(ns string) ([]policyv1.PodDisruptionBudget, error)) (*disruptionBudgets, error) {
	out := &disruptionBudgets{byNamespace: map[string][]*disruptionBudget{}}
	for _, ns := range namespacesBehind(pods) {
		pdbs, err := list(ns)
		if err != nil {
			return nil, err
		}
		for i := range pdbs {
			pdb := &pdbs[i]
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || pdb.Spec.Selector == nil || sel.Empty() {
				continue
			}
			out.byNamespace[ns] = append(out.byNamespace[ns], &disruptionBudget{name: pdb.Name, selector: sel, allowed: pdb.Status.DisruptionsAllowed})
		}
	}
	return out, nil
}

// listDisruptionBudgets lists a namespace's budgets through c.
func listDisruptionBudgets(ctx context.Context, c client.Reader) func(ns string) ([]policyv1.PodDisruptionBudget, error) {
	return func(ns string) ([]policyv1.PodDisruptionBudget, error) {
		var list policyv1.PodDisruptionBudgetList
		err := c.List(ctx, &list, client.InNamespace(ns))
		return list.Items, err
	}
}

// namespacesBehind returns, sorted, the namespaces of the pods not at the
// latest revision.
func namespacesBehind(pods []*podState) []string {
	seen := map[string]bool{}
	for _, p := range pods {
		if !p.atLatest() {
			seen[p.pod.Namespace] = true
		}
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// take reports whether every budget covering pod allows one more
// disruption, and if so counts it against them; otherwise it names a
// budget that allows none.
func (b *disruptionBudgets) take(pod *corev1.Pod) (blockedBy string, ok bool) {
	if b == nil {
		return "", true
	}
	var covering []*disruptionBudget
	for _, d := range b.byNamespace[pod.Namespace] {
		if d.selector.Matches(labels.Set(pod.Labels)) {
			if d.allowed <= 0 {
				return d.name, false
			}
			covering = append(covering, d)
		}
	}
	for _, d := range covering {
		d.allowed--
	}
	return "", true
}

// workloadOf is the key a pod's share of maxUnavailable is counted under
// with maxUnavailableScope Workload: its controller's UID, or the pod's own
// for a pod no controller owns.
func workloadOf(pod *corev1.Pod) types.UID {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil {
		return ref.UID
	}
	return pod.UID
}

// blockedPodNames lists the pods of a plan a budget held back, sorted.
func blockedPodNames(plan rolloutPlan) []string {
	out := make([]string, 0, len(plan.disruptionBlocked))
	for _, p := range plan.disruptionBlocked {
		out = append(out, podKey(p.pod))
	}
	slices.Sort(out)
	return out
}
