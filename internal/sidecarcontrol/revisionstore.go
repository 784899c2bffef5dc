package sidecarcontrol

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// revisionSelector selects SidecarSets' ControllerRevisions.
var revisionSelector = func() labels.Selector {
	req, err := labels.NewRequirement(deckhandv1alpha1.SidecarSetNameLabel, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}()

// watchRevisions gives l the SidecarSets' ControllerRevisions: an informer
// cache of its own, limited to RevisionNamespace and to the
// apps.deckhand.dev/sidecarset label (the manager's cache keeps only
// PodSets' ControllerRevisions, cluster-wide), added to mgr before it
// starts.
func (l *Lister) watchRevisions(mgr manager.Manager) error {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient:        mgr.GetHTTPClient(),
		Scheme:            mgr.GetScheme(),
		Mapper:            mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{l.namespace: {}},
		DefaultTransform:  cache.TransformStripManagedFields(),
		ByObject:          map[client.Object]cache.ByObject{&appsv1.ControllerRevision{}: {Label: revisionSelector}},
	})
	if err != nil {
		return fmt.Errorf("creating the SidecarSet revision cache: %w", err)
	}
	// NOTE: a runnable that does not say otherwise runs only on the leader;
	// every replica's pod webhook reads the revisions, so the cache runs on
	// every replica, as the manager's own cache does.
	if err := mgr.Add(everyReplica{c}); err != nil {
		return err
	}
	inf, err := c.GetInformer(context.Background(), &appsv1.ControllerRevision{}, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	st := &revisionStore{cache: c, bySet: map[string]map[string]*revision{}}
	if _, err := inf.AddEventHandler(st); err != nil {
		return fmt.Errorf("watching SidecarSet revisions: %w", err)
	}
	l.revisions = st
	synced := l.synced
	l.synced = func() bool { return synced() && inf.HasSynced() }
	return nil
}

// everyReplica runs a cache on every replica, leader or not.
type everyReplica struct{ cache.Cache }

func (everyReplica) NeedLeaderElection() bool { return false }

// revisionStore holds every SidecarSet ControllerRevision its informer has
// shown, by SidecarSet (label value) and name, with what each decodes to.
type revisionStore struct {
	cache cache.Cache
	mu    sync.RWMutex
	bySet map[string]map[string]*revision
}

// revision is one ControllerRevision as the store holds it.
type revision struct {
	cr            *appsv1.ControllerRevision // shared with the cache
	hash          string
	customVersion string
	owner         types.UID
	// decoded is shared by every version of the same object (same UID): a
	// ControllerRevision's data cannot change, only its labels and number.
	decoded *decodedRevision
}

// decodedRevision is a ControllerRevision's data decoded once, and the
// SidecarSet it implies for the generation that last pinned it.
type decodedRevision struct {
	once    sync.Once
	spec    RevisionSpec
	running RunningRevision
	err     error
	pinned  atomic.Pointer[pinnedForm]
}

// decode decodes r's data the first time it is asked for.
func (r *revision) decode() *decodedRevision {
	d := r.decoded
	d.once.Do(func() {
		d.spec, d.err = DecodeRevision(r.cr)
		if d.err == nil {
			d.running = RunningRevisionOf(d.spec)
		}
	})
	return d
}

// pinnedForm is a SidecarSet generation (key) with the injected parts of a
// pinned revision, and its Compiled form.
type pinnedForm struct {
	key      derivedKey
	set      *deckhandv1alpha1.SidecarSet
	compiled *Compiled
}

var _ toolscache.ResourceEventHandler = &revisionStore{}

func (st *revisionStore) OnAdd(obj any, _ bool) { st.put(obj) }

func (st *revisionStore) OnUpdate(_, obj any) { st.put(obj) }

func (st *revisionStore) OnDelete(obj any) {
	cr, ok := deleted[*appsv1.ControllerRevision](obj)
	if !ok {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	set := cr.Labels[deckhandv1alpha1.SidecarSetNameLabel]
	if r := st.bySet[set][cr.Name]; r != nil && r.cr.UID == cr.UID {
		delete(st.bySet[set], cr.Name)
		if len(st.bySet[set]) == 0 {
			delete(st.bySet, set)
		}
	}
}

func (st *revisionStore) put(obj any) {
	cr, ok := obj.(*appsv1.ControllerRevision)
	if !ok {
		return
	}
	r := &revision{
		cr:            cr,
		hash:          cr.Labels[deckhandv1alpha1.SidecarSetRevisionLabel],
		customVersion: cr.Labels[deckhandv1alpha1.SidecarSetCustomVersionLabel],
	}
	if ref := metav1.GetControllerOfNoCopy(cr); ref != nil {
		r.owner = ref.UID
	}
	set := cr.Labels[deckhandv1alpha1.SidecarSetNameLabel]
	st.mu.Lock()
	defer st.mu.Unlock()
	for s, revs := range st.bySet {
		// A relabelled object moves.
		if old := revs[cr.Name]; old != nil && s != set {
			delete(revs, cr.Name)
		}
	}
	revs := st.bySet[set]
	if revs == nil {
		revs = map[string]*revision{}
		st.bySet[set] = revs
	}
	if old := revs[cr.Name]; old != nil && old.cr.UID == cr.UID {
		r.decoded = old.decoded
	} else {
		r.decoded = &decodedRevision{}
	}
	revs[cr.Name] = r
}

// owned returns the revisions s controls, unsorted.
func (st *revisionStore) owned(s *deckhandv1alpha1.SidecarSet) []*revision {
	st.mu.RLock()
	defer st.mu.RUnlock()
	revs := st.bySet[NameLabelValue(s.Name)]
	out := make([]*revision, 0, len(revs))
	for _, r := range revs {
		if r.owner == s.UID {
			out = append(out, r)
		}
	}
	return out
}

// pinned returns the revision spec.injectionStrategy.revision of s names,
// nil if none or if it names none s controls.
func (st *revisionStore) pinned(s *deckhandv1alpha1.SidecarSet) *revision {
	pin := s.Spec.InjectionStrategy.Revision
	if pin == nil {
		return nil
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	revs := st.bySet[NameLabelValue(s.Name)]
	if pin.RevisionName != nil {
		if r := revs[*pin.RevisionName]; r != nil && r.owner == s.UID {
			return r
		}
		return nil
	}
	if pin.CustomVersion == nil {
		return nil
	}
	var newest *revision
	for _, r := range revs {
		if r.owner == s.UID && r.customVersion == *pin.CustomVersion && (newest == nil || r.cr.Revision > newest.cr.Revision ||
			r.cr.Revision == newest.cr.Revision && r.cr.Name > newest.cr.Name) {
			newest = r
		}
	}
	return newest
}

// form returns s with the injected parts of r, and its Compiled form,
// computed once per generation of s (the pod webhook asks per pod).
func (r *revision) form(s *deckhandv1alpha1.SidecarSet, allow PodMetadataAllowlists) (*deckhandv1alpha1.SidecarSet, *Compiled, error) {
	d := r.decode()
	if d.err != nil {
		return nil, nil, d.err
	}
	k := keyOf(s)
	if pf := d.pinned.Load(); pf != nil && pf.key == k && cacheable(k) {
		return pf.set, pf.compiled, nil
	}
	cp := *s
	cp.Spec.InitContainers, cp.Spec.Containers = d.spec.InitContainers, d.spec.Containers
	cp.Spec.Volumes, cp.Spec.ImagePullSecrets = d.spec.Volumes, d.spec.ImagePullSecrets
	pf := &pinnedForm{key: k, set: &cp, compiled: compile(&cp, allow)}
	d.pinned.Store(pf)
	return pf.set, pf.compiled, nil
}

// Revisions returns the ControllerRevisions s controls (shared with the
// cache), oldest revision number first; nil without Options.Revisions.
func (l *Lister) Revisions(s *deckhandv1alpha1.SidecarSet) []*appsv1.ControllerRevision {
	if l.revisions == nil {
		return nil
	}
	revs := l.revisions.owned(s)
	out := make([]*appsv1.ControllerRevision, len(revs))
	for i, r := range revs {
		out[i] = r.cr
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Revision != out[j].Revision {
			return out[i].Revision < out[j].Revision
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// RunningRevision is a revision's RunningHashes.
type RunningRevision struct {
	Hash, WithoutImage string
}

// RunningRevisionOf returns the RunningHashes of what a revision holds.
func RunningRevisionOf(spec RevisionSpec) RunningRevision {
	s := deckhandv1alpha1.SidecarSetSpec{InitContainers: spec.InitContainers, Containers: spec.Containers,
		Volumes: spec.Volumes, ImagePullSecrets: spec.ImagePullSecrets}
	var r RunningRevision
	r.Hash, r.WithoutImage = RunningHashes(&s)
	return r
}

// RunningRevisions returns the RunningHashes of the revisions s controls,
// by revision hash (the label value, which a pod's record names); nil
// without Options.Revisions. Each ControllerRevision is decoded once. A hash
// two revisions of different content carry (a collision) is left out: which
// one a pod got is not known.
func (l *Lister) RunningRevisions(s *deckhandv1alpha1.SidecarSet) map[string]RunningRevision {
	if l.revisions == nil {
		return nil
	}
	revs := l.revisions.owned(s)
	out := make(map[string]RunningRevision, len(revs))
	collided := map[string]bool{}
	for _, r := range revs {
		d := r.decode()
		if d.err != nil || r.hash == "" || collided[r.hash] {
			continue
		}
		if seen, ok := out[r.hash]; ok && seen != d.running {
			delete(out, r.hash)
			collided[r.hash] = true
			continue
		}
		out[r.hash] = d.running
	}
	return out
}

// RevisionForm returns s with the injected parts of its revision of hash
// (the label value a pod's record names), and its Compiled form; false when
// s controls no decodable revision of that hash, or two (a collision).
func (l *Lister) RevisionForm(s *deckhandv1alpha1.SidecarSet, hash string) (*deckhandv1alpha1.SidecarSet, *Compiled, bool) {
	if l.revisions == nil || hash == "" {
		return nil, nil, false
	}
	var found *revision
	for _, r := range l.revisions.owned(s) {
		if r.hash != hash {
			continue
		}
		if found != nil {
			return nil, nil, false
		}
		found = r
	}
	if found == nil {
		return nil, nil, false
	}
	set, c, err := found.form(s, l.podMetadataAllowlists())
	return set, c, err == nil
}

// RevisionsWatched reports whether l reads the revisions (Options.Revisions).
func (l *Lister) RevisionsWatched() bool { return l.revisions != nil }

// RevisionCache returns the cache l reads the revisions from, or nil
// without Options.Revisions.
func (l *Lister) RevisionCache() cache.Cache {
	if l.revisions == nil {
		return nil
	}
	return l.revisions.cache
}
