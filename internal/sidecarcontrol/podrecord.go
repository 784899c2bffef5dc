package sidecarcontrol

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// PodRecord is what a pod's annotations record about the SidecarSets
// injected into it. Three annotations hold it:
//
//	apps.deckhand.dev/sidecarsets                     a,b
//	apps.deckhand.dev/sidecarset-hash                 {"a":{"hash":"1f..","containers":["log"]},"b":{..}}
//	apps.deckhand.dev/sidecarset-hash-without-image   {"a":{"hash":"9c.."},"b":{..}}
//
// ReadPodRecord parses them once; the accessors read the result, Set
// changes it and Values or Apply render it back. The zero PodRecord records
// nothing. Malformed annotations read as empty.
type PodRecord struct {
	// names is the injected annotation as written: names, comma-separated.
	names string
	// hash and withoutImage are shared with other pods' records (parsed
	// annotation texts are memoised) until Set copies them: owned says it has.
	hash, withoutImage map[string]recordEntry
	owned              bool
}

// recordEntry is one SidecarSet's entry in either revision annotation.
type recordEntry struct {
	// Hash is the revision (or the revision with images left out).
	Hash string `json:"hash"`
	// Containers are the names of the containers and init containers the
	// SidecarSet injected into the pod (the revision annotation only). The
	// pod webhook records a SidecarSet only when it owns all of them: a
	// pod's own container of the same name keeps the SidecarSet out.
	Containers []string `json:"containers,omitempty"`
}

// ReadPodRecord reads the injection record in a pod's annotations.
func ReadPodRecord(annotations map[string]string) PodRecord {
	return PodRecord{
		names:        annotations[deckhandv1alpha1.SidecarSetInjectedAnnotation],
		hash:         parsedRecords.lookup(annotations[deckhandv1alpha1.SidecarSetHashAnnotation]),
		withoutImage: parsedRecords.lookup(annotations[deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation]),
	}
}

// Names returns the SidecarSets the pod records as injected.
func (r PodRecord) Names() []string {
	if r.names == "" {
		return nil
	}
	return strings.Split(r.names, ",")
}

// Has reports whether the pod records an injection by the SidecarSet
// called name.
func (r PodRecord) Has(name string) bool {
	for v := r.names; v != ""; {
		i := strings.IndexByte(v, ',')
		if i < 0 {
			return v == name
		}
		if v[:i] == name {
			return true
		}
		v = v[i+1:]
	}
	return false
}

// Revisions returns the revision and the image-less revision recorded for
// the SidecarSet called name ("" when absent).
func (r PodRecord) Revisions(name string) (hash, withoutImage string) {
	return r.hash[name].Hash, r.withoutImage[name].Hash
}

// HasRevision reports whether a revision is recorded for the SidecarSet
// called name.
func (r PodRecord) HasRevision(name string) bool {
	_, ok := r.hash[name]
	return ok
}

// Containers returns the containers the SidecarSet called name injected,
// as recorded. The slice is shared and must not be modified.
func (r PodRecord) Containers(name string) []string {
	return r.hash[name].Containers
}

// Set records the SidecarSet called name as injected at revision hash
// (withoutImage with images left out), owning containers.
func (r *PodRecord) Set(name, hash, withoutImage string, containers []string) {
	if !r.owned {
		r.hash, r.withoutImage = cloneEntries(r.hash), cloneEntries(r.withoutImage)
		r.owned = true
	}
	r.hash[name] = recordEntry{Hash: hash, Containers: containers}
	r.withoutImage[name] = recordEntry{Hash: withoutImage}
	names := make([]string, 0, len(r.hash))
	for n := range r.hash {
		names = append(names, n)
	}
	sort.Strings(names)
	r.names = strings.Join(names, ",")
}

// Keep returns the record with only the SidecarSets keep accepts, and
// whether that is not the record as read. The pod webhook keeps, on a new
// pod, only what this admission wrote (the entries of the SidecarSets the
// API server injected by policy): any other entry was written by the pod's
// creator, and trusting it would let a pod pass its own container for a
// sidecar or skip a mandatory SidecarSet. Names the injected annotation
// lists without a revision are dropped too.
func (r PodRecord) Keep(keep func(name string) bool) (PodRecord, bool) {
	var out PodRecord
	for name, e := range r.hash {
		if keep(name) {
			out.Set(name, e.Hash, r.withoutImage[name].Hash, e.Containers)
		}
	}
	changed := out.names != r.names || len(out.hash) != len(r.hash) || len(out.withoutImage) != len(r.withoutImage)
	return out, changed
}

// IsEmpty reports whether the record names no SidecarSet.
func (r PodRecord) IsEmpty() bool {
	return r.names == "" && len(r.hash) == 0 && len(r.withoutImage) == 0
}

func cloneEntries(m map[string]recordEntry) map[string]recordEntry {
	out := make(map[string]recordEntry, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Values renders the record as the values of its three annotations
// (injected names, revisions, image-less revisions), deterministically.
func (r PodRecord) Values() (injected, hash, withoutImage string) {
	return r.names, renderEntries(r.hash), renderEntries(r.withoutImage)
}

// Apply writes the record into obj's annotations.
func (r PodRecord) Apply(obj metav1.Object) {
	a := obj.GetAnnotations()
	if a == nil {
		a = make(map[string]string, 3)
	}
	a[deckhandv1alpha1.SidecarSetInjectedAnnotation], a[deckhandv1alpha1.SidecarSetHashAnnotation], a[deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation] = r.Values()
	obj.SetAnnotations(a)
}

// renderEntries encodes a revision annotation; encoding/json writes map
// keys sorted.
func renderEntries(m map[string]recordEntry) string {
	if m == nil {
		return "{}"
	}
	b, err := json.Marshal(m)
	if err != nil {
		// Strings and string slices always encode.
		panic(err)
	}
	return string(b)
}

// parsedRecords memoises the parsing of revision annotations: pods injected
// at the same revisions carry byte-identical values, so the SidecarSet
// controller, which reads the record of every matched pod on every
// reconcile, parses a handful of distinct strings.
var parsedRecords recordMemo

// recordMemo maps an annotation's text to its parsed entries. It is
// bounded: when full it starts over, which costs a few re-parses and keeps
// memory flat whatever the annotations hold. The maps it returns are shared
// and never modified.
type recordMemo struct {
	mu sync.Mutex
	m  map[string]map[string]recordEntry
}

const recordMemoSize = 512

func (c *recordMemo) lookup(raw string) map[string]recordEntry {
	if raw == "" {
		return nil
	}
	c.mu.Lock()
	v, ok := c.m[raw]
	c.mu.Unlock()
	if ok {
		return v
	}
	// What decodes of a malformed value is kept, as it always was.
	_ = json.Unmarshal([]byte(raw), &v)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= recordMemoSize {
		c.m = make(map[string]map[string]recordEntry, recordMemoSize)
	}
	c.m[raw] = v
	c.mu.Unlock()
	return v
}
