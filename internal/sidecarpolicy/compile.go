package sidecarpolicy

import (
	"fmt"
	"sort"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/names"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// What the compiled policy does, and why it can be exact although the API
// server applies the policies of several SidecarSets one after the other in
// no set order (it ranges over a map):
//
//   - The webhook injects every matching SidecarSet in name order: before-app
//     sidecars of a SidecarSet go after those of SidecarSets with smaller
//     names, after-app sidecars, volumes and pull secrets are appended in
//     name order. A policy therefore places its items by counting the items
//     of its peers (the other Policy-mode SidecarSets that can select the
//     same pods, whose names it is compiled with) already in the pod:
//     before-app items after the peers with smaller names that were applied,
//     after-app items before those of the applied peers with larger names.
//     A peer is applied when the pod's record names it.
//   - Which containers are the pod's own (whose volume mounts are shared and
//     whose env is transferred) is the pod's containers minus the applied
//     peers' ones.
//   - The record annotations are rewritten by string surgery on the JSON the
//     webhook writes (CEL cannot parse JSON): entries sorted by name, this
//     SidecarSet's entry replaced. A record that is not in the webhook's
//     exact form reads as empty.
//
// A pod without a record takes a shorter path (freshCondition): nothing has
// been injected yet, so every item's place is known when compiling, and
// the API server evaluates none of the variables above.
//
// Exact for pods created without an injection record (every pod a workload
// controller creates from a template). A pod created carrying one that
// names a peer (a copy of an injected pod) may get its sidecars in another
// order than from the webhook. Two Policy-mode SidecarSets that can select
// the same pod may not share a volume or pull secret name (the webhook's
// validation refuses it): the first in name order would have to own it.

// Annotation and label keys of the compiled objects.
const (
	// SidecarSetLabel names, on the policy and binding, the SidecarSet they
	// were compiled from (when the name fits a label value).
	SidecarSetLabel = "apps.deckhand.dev/sidecarset"
	// RevisionAnnotation on the policy is the SidecarSet revision (hash) it
	// injects.
	RevisionAnnotation = "apps.deckhand.dev/sidecarset-revision"
	// namePrefix starts every compiled object's name.
	namePrefix = "deckhand-sidecarset-"
)

// Name returns the name of the policy and binding compiled from the
// SidecarSet called name: the prefix and the name, or, when that is longer
// than an object name may be, a cut with a hash of the whole.
func Name(name string) string {
	return names.Rule{Max: 253, Digits: 16}.Shorten(namePrefix+name, name)
}

// Options are the cluster facts a compilation depends on.
type Options struct {
	// ProtectedNamespaces are never injected (sidecarcontrol.Lister.IsProtectedNamespace).
	ProtectedNamespaces []string
	// ManagerUser is the username of Deckhand's own requests
	// (sidecarcontrol.Lister.ManagerUser): its pods with the skip-injection
	// annotation are left alone by every policy. "" trusts no one.
	ManagerUser string
}

// OptionsOf are the facts of the manager whose SidecarSets l reads.
func OptionsOf(l *sidecarcontrol.Lister) Options {
	return Options{ProtectedNamespaces: l.ProtectedNamespaceNames(), ManagerUser: l.ManagerUser()}
}

// Compile returns the MutatingAdmissionPolicy and binding that inject s.
// peers are the other SidecarSets injected by policy that can select the
// same pods (sidecarcontrol.CanOverlap); their order does not matter. The
// objects carry no owner reference: the caller sets it.
func Compile(s *deckhandv1alpha1.SidecarSet, peers []*deckhandv1alpha1.SidecarSet, opts Options) (*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding) {
	name := Name(s.Name)
	labels := map[string]string{"app.kubernetes.io/managed-by": "deckhand"}
	if len(s.Name) <= 63 {
		labels[SidecarSetLabel] = s.Name
	}
	hash, _ := sidecarcontrol.Hashes(&s.Spec)
	c := newCompiler(s, peers)
	c.managerUser = opts.ManagerUser
	policy := &admissionregistrationv1.MutatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{RevisionAnnotation: hash}},
		Spec: admissionregistrationv1.MutatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: namespaceSelector(s, opts.ProtectedNamespaces),
				ObjectSelector:    s.Spec.Selector.DeepCopy(),
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
					RuleWithOperations: admissionregistrationv1.RuleWithOperations{
						Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
						Rule: admissionregistrationv1.Rule{
							APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
						},
					},
				}},
			},
			MatchConditions: c.matchConditions(),
			Variables:       c.variables(),
			Mutations: []admissionregistrationv1.Mutation{{
				PatchType: admissionregistrationv1.PatchTypeJSONPatch,
				JSONPatch: &admissionregistrationv1.JSONPatch{Expression: c.patch()},
			}},
			// Ignore, as the webhook: a policy that cannot be evaluated must
			// not stop pods from being created; the SidecarSet controller
			// counts a pod admitted without its sidecars in notInjectedPods.
			FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
			// Never, as the webhook: injection is complete in one pass.
			ReinvocationPolicy: admissionregistrationv1.NeverReinvocationPolicy,
		},
	}
	binding := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "MutatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: name},
	}
	return policy, binding
}

// namespaceSelector is spec.namespaceSelector with spec.namespace and the
// protected namespaces as requirements on the label the API server sets on
// every namespace, and without the namespaces labelled out of every
// SidecarSet.
func namespaceSelector(s *deckhandv1alpha1.SidecarSet, protected []string) *metav1.LabelSelector {
	sel := &metav1.LabelSelector{}
	if s.Spec.NamespaceSelector != nil {
		sel = s.Spec.NamespaceSelector.DeepCopy()
	}
	const key = "kubernetes.io/metadata.name"
	if s.Spec.Namespace != "" {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpIn, Values: []string{s.Spec.Namespace}})
	}
	if len(protected) > 0 {
		sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: key, Operator: metav1.LabelSelectorOpNotIn, Values: append([]string(nil), protected...)})
	}
	sel.MatchExpressions = append(sel.MatchExpressions, podutil.SidecarSetOptOut())
	return sel
}

// Record annotation forms the webhook writes (sidecarcontrol.PodRecord):
// names are object names, containers DNS labels, hashes hex.
const (
	reName      = `"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"`
	reContainer = `"[a-z0-9]([-a-z0-9]*[a-z0-9])?"`
	reEntry     = reName + `:\{"hash":"[0-9a-f]*"(,"containers":\[` + reContainer + `(,` + reContainer + `)*\])?\}`
	reEntryWI   = reName + `:\{"hash":"[0-9a-f]*"\}`
	reRecord    = `^\{(` + reEntry + `(,` + reEntry + `)*)?\}$`
	reRecordWI  = `^\{(` + reEntryWI + `(,` + reEntryWI + `)*)?\}$`
)

// peer is what a policy knows of another Policy-mode SidecarSet.
type peer struct {
	name                                   string
	before, after                          bool // sorts before/after the compiled SidecarSet
	beforeInit, afterInit, beforeC, afterC []string
	volumes, secrets                       []string
	all                                    []string // every container name
}

type compiler struct {
	s           *deckhandv1alpha1.SidecarSet
	managerUser string
	peers       []peer
	hash        string
	wi          string
	names       []string // the SidecarSet's container names, init first
}

func newCompiler(s *deckhandv1alpha1.SidecarSet, peers []*deckhandv1alpha1.SidecarSet) *compiler {
	c := &compiler{s: s}
	c.hash, c.wi = sidecarcontrol.Hashes(&s.Spec)
	for i := range s.Spec.InitContainers {
		c.names = append(c.names, s.Spec.InitContainers[i].Name)
	}
	for i := range s.Spec.Containers {
		c.names = append(c.names, s.Spec.Containers[i].Name)
	}
	for _, o := range peers {
		if o.Name == s.Name {
			continue
		}
		p := peer{name: o.Name, before: o.Name < s.Name, after: o.Name > s.Name}
		p.beforeInit, p.afterInit = split(o.Spec.InitContainers)
		p.beforeC, p.afterC = split(o.Spec.Containers)
		for i := range o.Spec.Volumes {
			p.volumes = append(p.volumes, o.Spec.Volumes[i].Name)
		}
		for _, ps := range o.Spec.ImagePullSecrets {
			p.secrets = append(p.secrets, ps.Name)
		}
		p.all = append(append(append(append([]string(nil), p.beforeInit...), p.afterInit...), p.beforeC...), p.afterC...)
		c.peers = append(c.peers, p)
	}
	sort.Slice(c.peers, func(i, j int) bool { return c.peers[i].name < c.peers[j].name })
	return c
}

func split(cs []deckhandv1alpha1.SidecarContainer) (before, after []string) {
	for i := range cs {
		if cs[i].PodInjectPolicy == deckhandv1alpha1.AfterAppContainer {
			after = append(after, cs[i].Name)
		} else {
			before = append(before, cs[i].Name)
		}
	}
	return before, after
}

func (c *compiler) matchConditions() []admissionregistrationv1.MatchCondition {
	// NOTE: the skip annotation is checked in the patch expression, not here:
	// the API server builds a CEL activation (the pod, the request holding
	// the pod again, the namespace, each converted to unstructured) for every
	// evaluation, so a match condition costs every pod a second one.
	if c.s.Spec.InjectionStrategy.Paused {
		// spec.injectionStrategy.paused: the policy stays in place and
		// matches nothing, so that resuming is one update.
		return []admissionregistrationv1.MatchCondition{{Name: "injection-not-paused", Expression: "false"}}
	}
	return nil
}

// skippedCondition is true for a pod left out of the SidecarSet by the
// skip-injection annotation: any pod that carries it when the SidecarSet
// allows opting out (spec.injectionStrategy.allowOptOut), else only
// Deckhand's own dry runs, by the request's userInfo and dryRun, which the
// API server fills itself. As sidecarcontrol.OptedOut and Lister.SkipsAll.
func (c *compiler) skippedCondition() string {
	annotated := fmt.Sprintf("has(object.metadata.annotations) && %s in object.metadata.annotations && object.metadata.annotations[%s] == 'true'",
		q(deckhandv1alpha1.SidecarSetSkipInjectionAnnotation), q(deckhandv1alpha1.SidecarSetSkipInjectionAnnotation))
	switch {
	case c.s.Spec.InjectionStrategy.AllowOptOut:
		return annotated
	case c.managerUser != "":
		return fmt.Sprintf("%s && request.dryRun && request.userInfo.username == %s", annotated, q(c.managerUser))
	}
	return "false"
}
