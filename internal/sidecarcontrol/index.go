package sidecarcontrol

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// IndexNamespace is the name of the informer index that maps a namespace key
// (NamespaceKey) to the SidecarSets that can select pods there.
const IndexNamespace = "deckhand.sidecarset.namespace"

// AllNamespacesKey is the index key of SidecarSets without spec.namespace:
// they can select pods in every namespace (subject to namespaceSelector).
const AllNamespacesKey = "*"

// NamespaceKey is the index key of SidecarSets limited to namespace ns.
func NamespaceKey(ns string) string { return "ns/" + ns }

// IndexKeys returns the IndexNamespace keys of s.
func IndexKeys(s *deckhandv1alpha1.SidecarSet) []string {
	if s.Spec.Namespace != "" {
		return []string{NamespaceKey(s.Spec.Namespace)}
	}
	return []string{AllNamespacesKey}
}

// Indexers are the informer indexers the SidecarSet informer carries.
func Indexers() toolscache.Indexers {
	return toolscache.Indexers{IndexNamespace: func(obj any) ([]string, error) {
		s, ok := obj.(*deckhandv1alpha1.SidecarSet)
		if !ok {
			return nil, nil
		}
		return IndexKeys(s), nil
	}}
}

// Lister finds SidecarSets and namespace labels in the informer cache
// without copying them. Objects it returns are shared with the cache and
// must not be modified.
type Lister struct {
	sidecarSets toolscache.Indexer
	namespaces  toolscache.Indexer
	synced      func() bool
	derived     *derivedStore
	modes       Modes
	// revisions holds the SidecarSets' ControllerRevisions; nil without
	// Options.Revisions.
	revisions *revisionStore
	// managerUser is Options.ManagerUser.
	managerUser string
	// namespace is Options.Namespace, or podutil.DeckhandNamespace.
	namespace string
	// protected are the namespaces no SidecarSet reaches.
	protected map[string]bool
}

// Options are the manager's SidecarSet settings a Lister is built with;
// the webhooks and controllers that share it only read them. The zero
// value injects in Webhook mode, lets spec.patchPodMetadata set no key and
// trusts no request to skip a mandatory SidecarSet.
type Options struct {
	// Modes says how SidecarSets are injected.
	Modes Modes
	// PodMetadata are the keys spec.patchPodMetadata may set
	// (--sidecarset-pod-metadata-allowlist, --sidecarset-pod-label-allowlist).
	PodMetadata PodMetadataAllowlists
	// ManagerUser is the username the API server gives Deckhand's own
	// requests (its ServiceAccount's, as a SelfSubjectReview says). Pods
	// dry-run by that user with the skip-injection annotation (the
	// synthetic pods a SidecarSet's validation dry-runs) are injected by no
	// SidecarSet (SkipsAll): the API server fills a request's userInfo and
	// dryRun itself, so no other client can claim them. Empty: no request
	// is trusted to skip a mandatory SidecarSet.
	ManagerUser string
	// Namespace is the manager's own namespace (cmd/deckhand reads it from
	// POD_NAMESPACE or its service account): SidecarSets' ControllerRevisions
	// live there and no SidecarSet reaches its pods. Empty:
	// podutil.DeckhandNamespace.
	Namespace string
	// ProtectedNamespaces are the namespaces no SidecarSet injects or
	// updates (--protected-namespaces), with podutil.ProtectedNamespaces
	// always among them (Deckhand's own being Namespace when it is set): the
	// pod webhook's configuration never sends the API server's requests for
	// those, so leaving them out here would only make the controller
	// disagree with the webhook. nil: DefaultProtectedNamespaces(Namespace).
	ProtectedNamespaces []string
	// Revisions, when set, is the manager whose every replica runs the
	// cache of SidecarSets' ControllerRevisions (ListerFromCache only): the
	// controller keeps the history, the pod webhook and the policy
	// controller inject pinned revisions. nil: the Lister reads no
	// revisions.
	Revisions manager.Manager
}

func newLister(sidecarSets, namespaces toolscache.Indexer, derived *derivedStore, opts Options) *Lister {
	protected := opts.ProtectedNamespaces
	if protected == nil {
		protected = DefaultProtectedNamespaces(opts.Namespace)
	}
	own := opts.Namespace
	if own == "" {
		own = podutil.DeckhandNamespace
	}
	return &Lister{sidecarSets: sidecarSets, namespaces: namespaces, synced: func() bool { return true }, derived: derived,
		modes: opts.Modes, managerUser: opts.ManagerUser, namespace: own, protected: protectedSet(opts.Namespace, protected)}
}

// Modes returns Options.Modes.
func (l *Lister) Modes() Modes { return l.modes }

// NewLister returns a Lister over the given indexers (tests and benchmarks
// build them with toolscache.NewIndexer). namespaces holds
// *metav1.PartialObjectMetadata or *corev1.Namespace keyed by name; nil
// means no namespace has labels.
func NewLister(sidecarSets, namespaces toolscache.Indexer, opts Options) *Lister {
	return newLister(sidecarSets, namespaces, newDerivedStore(opts.PodMetadata), opts)
}

type indexerGetter interface {
	GetIndexer() toolscache.Indexer
}

// ListerFromCache registers the SidecarSet index and a metadata-only
// Namespace informer with c (before or after it starts) and returns a Lister
// with opts reading from them, whose compiled SidecarSets the SidecarSet
// informer's events keep current; with opts.Revisions, it also reads the
// SidecarSets' ControllerRevisions from a cache it adds to that manager
// (call it before the manager starts then). Calling it more than once for
// one cache is fine.
func ListerFromCache(ctx context.Context, c cache.Cache, opts Options) (*Lister, error) {
	ssInf, err := c.GetInformer(ctx, &deckhandv1alpha1.SidecarSet{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	if err := ssInf.AddIndexers(Indexers()); err != nil && !strings.Contains(err.Error(), "conflict") {
		return nil, fmt.Errorf("adding the SidecarSet namespace index: %w", err)
	}
	nsMeta := &metav1.PartialObjectMetadata{}
	nsMeta.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	nsInf, err := c.GetInformer(ctx, nsMeta, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, err
	}
	ssIdx, ok1 := ssInf.(indexerGetter)
	nsIdx, ok2 := nsInf.(indexerGetter)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("the cache's informers do not expose their indexers")
	}
	derived := newDerivedStore(opts.PodMetadata)
	if _, err := ssInf.AddEventHandler(derived); err != nil {
		return nil, fmt.Errorf("watching SidecarSets for their compiled form: %w", err)
	}
	l := newLister(ssIdx.GetIndexer(), nsIdx.GetIndexer(), derived, opts)
	l.synced = func() bool { return ssInf.HasSynced() && nsInf.HasSynced() }
	if opts.Revisions != nil {
		if err := l.watchRevisions(opts.Revisions); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// HasSynced reports whether the underlying informers have synced.
func (l *Lister) HasSynced() bool { return l.synced() }

// Candidates returns the SidecarSets that can select pods in namespace ns,
// sorted by name (the order injection follows). It reads the index only:
// a pod never scans every SidecarSet.
func (l *Lister) Candidates(ns string) ([]*deckhandv1alpha1.SidecarSet, error) {
	scoped, err := l.sidecarSets.ByIndex(IndexNamespace, NamespaceKey(ns))
	if err != nil {
		return nil, err
	}
	all, err := l.sidecarSets.ByIndex(IndexNamespace, AllNamespacesKey)
	if err != nil {
		return nil, err
	}
	if len(scoped)+len(all) == 0 {
		return nil, nil
	}
	out := make([]*deckhandv1alpha1.SidecarSet, 0, len(scoped)+len(all))
	for _, objs := range [][]any{scoped, all} {
		for _, o := range objs {
			if s, ok := o.(*deckhandv1alpha1.SidecarSet); ok && s.DeletionTimestamp == nil {
				out = append(out, s)
			}
		}
	}
	if len(out) > 1 {
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	}
	return out, nil
}

// Compiled returns the Compiled form of s (an object from this Lister),
// computed once per generation.
func (l *Lister) Compiled(s *deckhandv1alpha1.SidecarSet) *Compiled {
	return l.derived.get(s)
}

// Matches reports whether s selects a pod with podLabels in namespace ns.
func (l *Lister) Matches(s *deckhandv1alpha1.SidecarSet, ns string, podLabels map[string]string) bool {
	return !l.IsProtectedNamespace(ns) && l.Compiled(s).Matches(s, ns, podLabels, l.NamespaceLabels)
}

// Select returns the SidecarSets that inject into a pod with these labels
// and annotations in namespace ns, in name order (the order of injection):
// the unpaused ones that select it and that it has not opted out of
// (OptedOut). byPolicy names the SidecarSets that select it but that the API
// server injects through their MutatingAdmissionPolicy (Policy mode): the
// pod has their sidecars already, and injecting them again would record them
// twice.
func (l *Lister) Select(ns string, labels, annotations map[string]string) (sets []*deckhandv1alpha1.SidecarSet, byPolicy []string, err error) {
	cands, err := l.Candidates(ns)
	if err != nil || len(cands) == 0 {
		return nil, nil, err
	}
	// Candidates returns a slice of its own: the selection reuses it.
	sets = cands[:0]
	for _, s := range cands {
		if !l.Matches(s, ns, labels) {
			continue
		}
		switch {
		case l.modes.ByPolicy(s):
			byPolicy = append(byPolicy, s.Name)
		case !s.Spec.InjectionStrategy.Paused && !OptedOut(s, annotations):
			sets = append(sets, s)
		}
	}
	return sets, byPolicy, nil
}

// MatchesNamespace reports whether s can select pods in namespace ns.
func (l *Lister) MatchesNamespace(s *deckhandv1alpha1.SidecarSet, ns string) bool {
	return !l.IsProtectedNamespace(ns) && l.Compiled(s).MatchesNamespace(s, ns, l.NamespaceLabels)
}

// Get returns the cached SidecarSet called name, or nil.
func (l *Lister) Get(name string) *deckhandv1alpha1.SidecarSet {
	o, ok, err := l.sidecarSets.GetByKey(name)
	if err != nil || !ok {
		return nil
	}
	s, _ := o.(*deckhandv1alpha1.SidecarSet)
	return s
}

// NamespaceLabels returns the labels of namespace ns from the cache and
// whether the namespace is known. The map is shared with the cache.
func (l *Lister) NamespaceLabels(ns string) (map[string]string, bool) {
	if l.namespaces == nil {
		return nil, false
	}
	o, ok, err := l.namespaces.GetByKey(ns)
	if err != nil || !ok {
		return nil, false
	}
	if m, ok := o.(metav1.Object); ok {
		return m.GetLabels(), true
	}
	return nil, false
}

// DefaultProtectedNamespaces are the namespaces the manager protects when
// --protected-namespaces is not set: the control plane's (kube-system,
// and kube-public, which every authenticated user may read), and
// Deckhand's own (own, or podutil.DeckhandNamespace when it is not known).
func DefaultProtectedNamespaces(own string) []string {
	if own == "" {
		own = podutil.DeckhandNamespace
	}
	return []string{metav1.NamespaceSystem, metav1.NamespacePublic, own}
}

// protectedSet is podutil.ProtectedNamespaces, with Deckhand's own namespace
// replaced by own when it is set (a manager installed into another
// namespace must still leave its own pods alone), plus extra.
func protectedSet(own string, extra []string) map[string]bool {
	m := map[string]bool{}
	for _, ns := range podutil.ProtectedNamespaces {
		if ns == podutil.DeckhandNamespace && own != "" {
			ns = own
		}
		m[ns] = true
	}
	for _, ns := range extra {
		if ns != "" {
			m[ns] = true
		}
	}
	return m
}

// IsProtectedNamespace reports whether pods in ns are out of every
// SidecarSet's reach: ns is protected (Options.ProtectedNamespaces), or
// labelled out of every SidecarSet (SidecarSetInjectionLabel), which the
// pod webhook's namespaceSelector leaves out too.
func (l *Lister) IsProtectedNamespace(ns string) bool {
	return l.protected[ns] || l.NamespaceOptsOut(ns)
}

// NamespaceOptsOut reports whether ns is labelled out of every SidecarSet
// (SidecarSetInjectionLabel: disabled).
func (l *Lister) NamespaceOptsOut(ns string) bool {
	labels, _ := l.NamespaceLabels(ns)
	return labels[deckhandv1alpha1.SidecarSetInjectionLabel] == deckhandv1alpha1.SidecarSetInjectionDisabled
}

// RevisionNamespace is the namespace of SidecarSets' ControllerRevisions:
// the manager's own (Options.Namespace).
func (l *Lister) RevisionNamespace() string { return l.namespace }

// All returns every cached SidecarSet (shared with the cache).
func (l *Lister) All() []*deckhandv1alpha1.SidecarSet {
	objs := l.sidecarSets.List()
	out := make([]*deckhandv1alpha1.SidecarSet, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*deckhandv1alpha1.SidecarSet); ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ProtectedNamespaceNames returns the namespaces IsProtectedNamespace
// reports, sorted: what a MutatingAdmissionPolicy compiled from a SidecarSet
// excludes by namespace name.
func (l *Lister) ProtectedNamespaceNames() []string {
	out := make([]string, 0, len(l.protected))
	for ns := range l.protected {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}
