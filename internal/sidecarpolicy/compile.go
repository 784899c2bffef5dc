package sidecarpolicy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
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
	n := namePrefix + name
	if len(n) <= 253 {
		return n
	}
	sum := sha256.Sum256([]byte(name))
	return n[:253-17] + "-" + hex.EncodeToString(sum[:8])
}

// Options are the cluster facts a compilation depends on.
type Options struct {
	// ProtectedNamespaces are never injected (sidecarcontrol.IsProtectedNamespace).
	ProtectedNamespaces []string
}

// DefaultOptions are the manager's.
func DefaultOptions() Options {
	return Options{ProtectedNamespaces: sidecarcontrol.ProtectedNamespaceNames()}
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
// every namespace.
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
	s     *deckhandv1alpha1.SidecarSet
	peers []peer
	hash  string
	wi    string
	names []string // the SidecarSet's container names, init first
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
	mc := []admissionregistrationv1.MatchCondition{{
		Name: "not-skipped",
		Expression: fmt.Sprintf("!(has(object.metadata.annotations) && %s in object.metadata.annotations && object.metadata.annotations[%s] == 'true')",
			q(deckhandv1alpha1.SidecarSetSkipInjectionAnnotation), q(deckhandv1alpha1.SidecarSetSkipInjectionAnnotation)),
	}}
	if c.s.Spec.InjectionStrategy.Paused {
		// spec.injectionStrategy.paused: the policy stays in place and
		// matches nothing, so that resuming is one update.
		mc = append(mc, admissionregistrationv1.MatchCondition{Name: "injection-not-paused", Expression: "false"})
	}
	return mc
}

// variables are evaluated lazily, once per admission, in this order.
func (c *compiler) variables() []admissionregistrationv1.Variable {
	var vs []admissionregistrationv1.Variable
	add := func(name, expr string) {
		vs = append(vs, admissionregistrationv1.Variable{Name: name, Expression: expr})
	}
	ann := func(key, re string) string {
		return fmt.Sprintf("has(object.metadata.annotations) && %[1]s in object.metadata.annotations && object.metadata.annotations[%[1]s].matches(%[2]s) ? object.metadata.annotations[%[1]s] : '{}'", q(key), q(re))
	}
	entries := func(v string) string {
		return fmt.Sprintf("variables.%[1]s == '{}' ? [] : variables.%[1]s.substring(1, variables.%[1]s.size() - 1).split('},').map(e, e.endsWith('}') ? e : e + '}')", v)
	}
	add("rec", ann(deckhandv1alpha1.SidecarSetHashAnnotation, reRecord))
	add("recWI", ann(deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation, reRecordWI))
	add("entries", entries("rec"))
	add("entriesWI", entries("recWI"))
	own := q(`"` + c.s.Name + `":{`)
	add("own", fmt.Sprintf("variables.entries.filter(e, e.startsWith(%s))", own))
	add("ownHash", `variables.own.size() == 0 ? '' : variables.own[0].split('"hash":"')[1].split('"')[0]`)
	add("ownContainers", `variables.own.size() == 0 || !variables.own[0].contains('"containers":[') ? [] : variables.own[0].split('"containers":[')[1].split(']')[0].split(',').map(n, n.substring(1, n.size() - 1))`)
	add("containers", "has(object.spec.containers) ? object.spec.containers : []")
	add("initContainers", "has(object.spec.initContainers) ? object.spec.initContainers : []")
	add("containerNames", "variables.containers.map(x, x.name)")
	add("initNames", "variables.initContainers.map(x, x.name)")
	add("names", "variables.containerNames + variables.initNames")
	add("volumeNames", "has(object.spec.volumes) ? object.spec.volumes.map(x, x.name) : []")
	add("secretNames", "has(object.spec.imagePullSecrets) ? object.spec.imagePullSecrets.map(x, x.name) : []")
	// A container of the same name the pod brought itself keeps the
	// SidecarSet out entirely, as in the webhook.
	add("clash", fmt.Sprintf("%s.exists(n, n in variables.names && !(n in variables.ownContainers))", strList(c.names)))
	var peerNames []string
	for _, p := range c.peers {
		peerNames = append(peerNames, p.name)
	}
	add("applied", fmt.Sprintf(`%s.filter(k, variables.rec.contains('{"' + k + '":{') || variables.rec.contains(',"' + k + '":{'))`, strList(peerNames)))
	// The containers the applied peers injected, which are not the pod's own.
	owned := []string{"[]"}
	for _, p := range c.peers {
		if len(p.all) > 0 {
			owned = append(owned, fmt.Sprintf("(%s in variables.applied ? %s : [])", q(p.name), strList(p.all)))
		}
	}
	add("peerOwned", strings.Join(owned, " + "))
	add("appContainers", "variables.containers.filter(x, !(x.name in variables.peerOwned))")
	add("appAll", "variables.appContainers + variables.initContainers.filter(x, !(x.name in variables.peerOwned))")
	add("appMounts", "variables.appContainers.map(x, has(x.volumeMounts) ? x.volumeMounts : []).flatten()")

	count := func(pick func(peer) ([]string, bool), present string) string {
		terms := []string{"0"}
		for _, p := range c.peers {
			if names, ok := pick(p); ok && len(names) > 0 {
				terms = append(terms, fmt.Sprintf("(%s in variables.applied ? %s.filter(n, n in variables.%s).size() : 0)", q(p.name), strList(names), present))
			}
		}
		return strings.Join(terms, " + ")
	}
	add("initLow", count(func(p peer) ([]string, bool) { return p.beforeInit, p.before }, "initNames"))
	add("initHigh", count(func(p peer) ([]string, bool) { return p.afterInit, p.after }, "initNames"))
	add("containerLow", count(func(p peer) ([]string, bool) { return p.beforeC, p.before }, "containerNames"))
	add("containerHigh", count(func(p peer) ([]string, bool) { return p.afterC, p.after }, "containerNames"))
	add("volumeHigh", count(func(p peer) ([]string, bool) { return p.volumes, p.after }, "volumeNames"))
	add("secretHigh", count(func(p peer) ([]string, bool) { return p.secrets, p.after }, "secretNames"))

	bi, ai := split(c.s.Spec.InitContainers)
	bc, ac := split(c.s.Spec.Containers)
	missing := func(names []string, present string) string {
		return fmt.Sprintf("%s.filter(n, !(n in variables.%s)).size()", strList(names), present)
	}
	add("newBeforeInit", missing(bi, "names"))
	add("newAfterInit", missing(ai, "names"))
	add("newBefore", missing(bc, "names"))
	add("newAfter", missing(ac, "names"))
	var vols, secs []string
	for i := range c.s.Spec.Volumes {
		vols = append(vols, c.s.Spec.Volumes[i].Name)
	}
	for _, ps := range c.s.Spec.ImagePullSecrets {
		secs = append(secs, ps.Name)
	}
	add("newVolumes", missing(vols, "volumeNames"))
	add("newSecrets", missing(secs, "secretNames"))
	add("adds", "variables.newBeforeInit + variables.newAfterInit + variables.newBefore + variables.newAfter + variables.newVolumes + variables.newSecrets > 0")
	// As the webhook: nothing to add and the record shows this revision.
	add("skip", fmt.Sprintf("variables.clash || (!variables.adds && variables.ownHash == %s)", q(c.hash)))

	// Env transfers and shared mounts, sidecar by sidecar.
	for _, l := range []struct {
		prefix string
		list   []deckhandv1alpha1.SidecarContainer
	}{{"i", c.s.Spec.InitContainers}, {"c", c.s.Spec.Containers}} {
		for i := range l.list {
			sc := &l.list[i]
			id := fmt.Sprintf("%s%d", l.prefix, i)
			if len(sc.TransferEnv) > 0 {
				env := listLit(sc.Env)
				for k, t := range sc.TransferEnv {
					src := fmt.Sprintf("variables.appAll.filter(x, x.name == %s).map(x, has(x.env) ? x.env.filter(e, e.name == %s) : [])", q(t.SourceContainerName), q(t.EnvName))
					add(fmt.Sprintf("src_%s_%d", id, k), fmt.Sprintf("%s.size() == 0 ? [] : %s[0]", src, src))
					s := fmt.Sprintf("variables.src_%s_%d", id, k)
					add(fmt.Sprintf("env_%s_%d", id, k), fmt.Sprintf("%[1]s.size() == 0 ? %[2]s : (%[2]s.exists(e, e.name == %[3]s) ? %[2]s.map(e, e.name == %[3]s ? %[1]s[0] : e) : %[2]s + [%[1]s[0]])",
						s, "dyn("+env+")", q(t.EnvName)))
					env = fmt.Sprintf("variables.env_%s_%d", id, k)
				}
				add("env_"+id, env)
			}
			if sc.ShareVolumePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled {
				var paths []string
				for _, m := range sc.VolumeMounts {
					paths = append(paths, m.MountPath)
				}
				add("mounts_"+id, fmt.Sprintf("dyn(%s) + lists.range(variables.appMounts.size()).filter(k, !(variables.appMounts[k].mountPath in %s) && !lists.range(k).exists(j, variables.appMounts[j].mountPath == variables.appMounts[k].mountPath)).map(k, variables.appMounts[k])",
					listLit(sc.VolumeMounts), strList(paths)))
			}
		}
	}

	// The record with this SidecarSet's entry at its place in name order.
	mine := fmt.Sprintf(`"%s":{"hash":"%s","containers":[%s]}`, c.s.Name, c.hash, quotedJoin(c.names))
	mineWI := fmt.Sprintf(`"%s":{"hash":"%s"}`, c.s.Name, c.wi)
	key := `e.substring(1, e.indexOf('":{'))`
	merged := func(v, entry string) string {
		return fmt.Sprintf("variables.%[1]s.filter(e, %[2]s < %[3]s) + [%[4]s] + variables.%[1]s.filter(e, %[2]s > %[3]s)", v, key, q(c.s.Name), q(entry))
	}
	add("newEntries", merged("entries", mine))
	add("newEntriesWI", merged("entriesWI", mineWI))
	return vs
}

// patch is the JSONPatch expression: the webhook's patch, computed in CEL.
func (c *compiler) patch() string {
	var ops []string
	op := func(cond, path, value string) {
		ops = append(ops, fmt.Sprintf("(%s ? [JSONPatch{op: 'add', path: %s, value: %s}] : [])", cond, path, value))
	}
	bi, ai := c.sidecars(c.s.Spec.InitContainers, "i")
	bc, ac := c.sidecars(c.s.Spec.Containers, "c")
	lists := []struct {
		path, low, high, size, newBefore string
		before, after                    []sidecarLit
	}{
		{"/spec/initContainers", "variables.initLow", "variables.initHigh", "variables.initContainers.size()", "variables.newBeforeInit", bi, ai},
		{"/spec/containers", "variables.containerLow", "variables.containerHigh", "variables.containers.size()", "variables.newBefore", bc, ac},
	}
	for _, l := range lists {
		if len(l.before)+len(l.after) == 0 {
			continue
		}
		field := strings.TrimPrefix(l.path, "/spec/")
		op(fmt.Sprintf("!has(object.spec.%s) && variables.newBefore%s + variables.newAfter%s > 0", field, suffix(field), suffix(field)), q(l.path), "[]")
		// Inserted last first at one index, items keep their spec order.
		for i := len(l.before) - 1; i >= 0; i-- {
			op(fmt.Sprintf("!(%s in variables.names)", q(l.before[i].name)), fmt.Sprintf("%s + '/' + string(%s)", q(l.path), l.low), l.before[i].value)
		}
		for i := len(l.after) - 1; i >= 0; i-- {
			op(fmt.Sprintf("!(%s in variables.names)", q(l.after[i].name)), fmt.Sprintf("%s + '/' + string(%s + %s - %s)", q(l.path), l.size, l.newBefore, l.high), l.after[i].value)
		}
	}
	for _, l := range []struct {
		path, field, present, high, newVar string
		items                              []sidecarLit
	}{
		{"/spec/volumes", "volumes", "volumeNames", "variables.volumeHigh", "variables.newVolumes", c.items(len(c.s.Spec.Volumes), func(i int) (string, any) { return c.s.Spec.Volumes[i].Name, &c.s.Spec.Volumes[i] })},
		{"/spec/imagePullSecrets", "imagePullSecrets", "secretNames", "variables.secretHigh", "variables.newSecrets", c.items(len(c.s.Spec.ImagePullSecrets), func(i int) (string, any) { return c.s.Spec.ImagePullSecrets[i].Name, &c.s.Spec.ImagePullSecrets[i] })},
	} {
		if len(l.items) == 0 {
			continue
		}
		op(fmt.Sprintf("!has(object.spec.%s) && %s > 0", l.field, l.newVar), q(l.path), "[]")
		// A name listed twice is added once (its first entry), as by the webhook.
		for i := len(l.items) - 1; i >= 0; i-- {
			it := l.items[i]
			if slices.ContainsFunc(l.items[:i], func(o sidecarLit) bool { return o.name == it.name }) {
				continue
			}
			op(fmt.Sprintf("!(%s in variables.%s)", q(it.name), l.present), fmt.Sprintf("%s + '/' + string(variables.%s.size() - %s)", q(l.path), l.present, l.high), it.value)
		}
	}
	op("!has(object.metadata.annotations)", q("/metadata/annotations"), "dyn({})")
	op("true", annotationPath(deckhandv1alpha1.SidecarSetInjectedAnnotation), "variables.newEntries.map(e, e.substring(1, e.indexOf('\":{'))).join(',')")
	op("true", annotationPath(deckhandv1alpha1.SidecarSetHashAnnotation), "'{' + variables.newEntries.join(',') + '}'")
	op("true", annotationPath(deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation), "'{' + variables.newEntriesWI.join(',') + '}'")
	full := "variables.skip ? [] :\n" + strings.Join(ops, " +\n")
	return fmt.Sprintf("%s ?\n(%s) :\n(%s)", freshCondition, c.freshPatch(bi, ai, bc, ac), full)
}

// freshCondition: the pod carries no injection record, the common case (a
// pod a workload controller creates from its template). Then no peer has
// injected anything yet, every sidecar name the pod has is the pod's own
// (so any clash keeps the SidecarSet out), and every item of the
// SidecarSet goes at a place known when compiling: the fresh patch needs
// none of the variables that parse the record or count peers, which is
// what the API server spends its time on per pod.
var freshCondition = fmt.Sprintf("!has(object.metadata.annotations) || !(%s in object.metadata.annotations || %s in object.metadata.annotations)",
	q(deckhandv1alpha1.SidecarSetHashAnnotation), q(deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation))

// freshPatch is the patch for a pod without a record (freshCondition).
func (c *compiler) freshPatch(bi, ai, bc, ac []sidecarLit) string {
	var ops []string
	add := func(path, value string) {
		ops = append(ops, fmt.Sprintf("[JSONPatch{op: 'add', path: %s, value: %s}]", path, value))
	}
	addIf := func(cond, path, value string) {
		ops = append(ops, fmt.Sprintf("(%s ? [JSONPatch{op: 'add', path: %s, value: %s}] : [])", cond, path, value))
	}
	names := strList(c.names)
	clash := fmt.Sprintf("(has(object.spec.containers) && object.spec.containers.exists(x, x.name in %[1]s)) || (has(object.spec.initContainers) && object.spec.initContainers.exists(x, x.name in %[1]s))", names)
	for _, l := range []struct {
		field         string
		before, after []sidecarLit
	}{{"initContainers", bi, ai}, {"containers", bc, ac}} {
		if len(l.before)+len(l.after) == 0 {
			continue
		}
		path := "/spec/" + l.field
		addIf(fmt.Sprintf("!has(object.spec.%s)", l.field), q(path), "[]")
		for i := len(l.before) - 1; i >= 0; i-- {
			add(q(path+"/0"), l.before[i].value)
		}
		for i := range l.after {
			add(q(path+"/-"), l.after[i].value)
		}
	}
	for _, l := range []struct {
		field string
		items []sidecarLit
	}{
		{"volumes", c.items(len(c.s.Spec.Volumes), func(i int) (string, any) { return c.s.Spec.Volumes[i].Name, &c.s.Spec.Volumes[i] })},
		{"imagePullSecrets", c.items(len(c.s.Spec.ImagePullSecrets), func(i int) (string, any) { return c.s.Spec.ImagePullSecrets[i].Name, &c.s.Spec.ImagePullSecrets[i] })},
	} {
		if len(l.items) == 0 {
			continue
		}
		path := "/spec/" + l.field
		addIf(fmt.Sprintf("!has(object.spec.%s)", l.field), q(path), "[]")
		for i, it := range l.items {
			if slices.ContainsFunc(l.items[:i], func(o sidecarLit) bool { return o.name == it.name }) {
				continue // a name listed twice is added once
			}
			addIf(fmt.Sprintf("!has(object.spec.%[1]s) || !object.spec.%[1]s.exists(x, x.name == %[2]s)", l.field, q(it.name)), q(path+"/-"), it.value)
		}
	}
	addIf("!has(object.metadata.annotations)", q("/metadata/annotations"), "dyn({})")
	add(annotationPath(deckhandv1alpha1.SidecarSetInjectedAnnotation), q(c.s.Name))
	add(annotationPath(deckhandv1alpha1.SidecarSetHashAnnotation), q(fmt.Sprintf(`{"%s":{"hash":"%s","containers":[%s]}}`, c.s.Name, c.hash, quotedJoin(c.names))))
	add(annotationPath(deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation), q(fmt.Sprintf(`{"%s":{"hash":"%s"}}`, c.s.Name, c.wi)))
	return fmt.Sprintf("(%s) ? [] :\n", clash) + strings.Join(ops, " +\n")
}

// annotationPath is the JSON patch path (a CEL literal) of annotation k.
func annotationPath(k string) string {
	return q("/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"))
}

func suffix(field string) string {
	if field == "initContainers" {
		return "Init"
	}
	return ""
}

// sidecarLit is one item to add: its name and its CEL value.
type sidecarLit struct{ name, value string }

func (c *compiler) items(n int, at func(int) (string, any)) []sidecarLit {
	out := make([]sidecarLit, 0, n)
	for i := 0; i < n; i++ {
		name, v := at(i)
		out = append(out, sidecarLit{name: name, value: lit(mustJSON(v))})
	}
	return out
}

// sidecars returns the CEL values of list's containers, split by placement:
// the container as the webhook encodes it, with env and volumeMounts taken
// from the variables when it transfers env or shares volumes.
func (c *compiler) sidecars(list []deckhandv1alpha1.SidecarContainer, prefix string) (before, after []sidecarLit) {
	for i := range list {
		sc := &list[i]
		id := fmt.Sprintf("%s%d", prefix, i)
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(mustJSON(&sc.Container)))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			panic(err) // encoded just now
		}
		fields := map[string]string{}
		for k, v := range m {
			fields[k] = lit(v)
		}
		if len(sc.TransferEnv) > 0 {
			fields["env"] = "variables.env_" + id
		}
		if sc.ShareVolumePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled {
			fields["volumeMounts"] = "variables.mounts_" + id
		}
		it := sidecarLit{name: sc.Name, value: mapLit(fields)}
		if sc.PodInjectPolicy == deckhandv1alpha1.AfterAppContainer {
			after = append(after, it)
		} else {
			before = append(before, it)
		}
	}
	return before, after
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // API types always encode
	}
	return b
}

// listLit is the CEL literal of v's JSON (a list), "[]" when empty.
func listLit(v any) string {
	if l := lit(mustJSON(v)); l != "null" {
		return l
	}
	return "[]"
}

// lit returns the CEL literal of a JSON value (raw JSON or decoded with
// UseNumber). Every element is wrapped in dyn(): the API server's CEL
// environment requires aggregate literals to be homogeneous.
func lit(v any) string {
	if raw, ok := v.([]byte); ok {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			panic(err)
		}
		v = x
	}
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case string:
		return q(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return strconv.FormatInt(i, 10)
		}
		return x.String()
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = "dyn(" + lit(e) + ")"
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		fields := make(map[string]string, len(x))
		for k, e := range x {
			fields[k] = lit(e)
		}
		return mapLit(fields)
	}
	panic(fmt.Sprintf("unexpected JSON value %T", v))
}

// mapLit is a CEL map literal of already-rendered values, keys sorted.
func mapLit(fields map[string]string) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = q(k) + ": dyn(" + fields[k] + ")"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// q is a CEL string literal.
func q(s string) string { return strconv.Quote(s) }

func strList(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = q(n)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func quotedJoin(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = `"` + n + `"`
	}
	return strings.Join(parts, ",")
}
