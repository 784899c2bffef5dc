package sidecarcontrol

import (
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"sync"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// HashEntry is one SidecarSet's entry in the
// apps.deckhand.dev/sidecarset-hash annotation.
type HashEntry struct {
	// Hash is the revision the pod carries.
	Hash string `json:"hash"`
	// Containers are the names of the containers and init containers the
	// SidecarSet injected into the pod. The pod webhook records a SidecarSet
	// only when it owns all of them: a pod's own container of the same name
	// keeps the SidecarSet out of the pod.
	Containers []string `json:"containers,omitempty"`
}

// HashWithoutImageEntry is one SidecarSet's entry in the
// apps.deckhand.dev/sidecarset-hash-without-image annotation.
type HashWithoutImageEntry struct {
	// Hash is the revision the pod carries with images left out.
	Hash string `json:"hash"`
}

// PodRecord is what the annotations of a pod say about its injections.
type PodRecord struct {
	Hash             map[string]HashEntry
	HashWithoutImage map[string]HashWithoutImageEntry
}

// ParsePodRecord reads the injection annotations of a pod. Malformed
// annotations read as empty.
func ParsePodRecord(annotations map[string]string) PodRecord {
	var r PodRecord
	if v := annotations[deckhandv1alpha1.AnnotationSidecarSetHash]; v != "" {
		_ = json.Unmarshal([]byte(v), &r.Hash)
	}
	if v := annotations[deckhandv1alpha1.AnnotationSidecarSetHashWithoutImage]; v != "" {
		_ = json.Unmarshal([]byte(v), &r.HashWithoutImage)
	}
	return r
}

// RecordedRevisions returns the revision and the image-less revision that a
// pod's annotations record for the SidecarSet called name ("" when absent or
// malformed). It is the read-only form of ParsePodRecord for the controller,
// which asks it of every matched pod on every reconcile: pods injected at the
// same revisions carry byte-identical annotation values, so the parsed values
// are memoised by annotation text and a reconcile over thousands of pods
// parses a handful of distinct strings.
func RecordedRevisions(annotations map[string]string, name string) (hash, withoutImage string) {
	if v := annotations[deckhandv1alpha1.AnnotationSidecarSetHash]; v != "" {
		hash = revisions.lookup(v)[name]
	}
	if v := annotations[deckhandv1alpha1.AnnotationSidecarSetHashWithoutImage]; v != "" {
		withoutImage = revisions.lookup(v)[name]
	}
	return hash, withoutImage
}

// parseRevisions reads either revision annotation: both map a SidecarSet
// name to an object whose "hash" is the revision.
func parseRevisions(raw string) map[string]string {
	var m map[string]struct {
		Hash string `json:"hash"`
	}
	_ = json.Unmarshal([]byte(raw), &m)
	out := make(map[string]string, len(m))
	for k, e := range m {
		out[k] = e.Hash
	}
	return out
}

// revisionMemo maps an annotation's text to the revisions it records per
// SidecarSet name. It is bounded: when full it starts over, which costs a
// few re-parses and keeps memory flat whatever the annotations hold.
type revisionMemo struct {
	mu sync.Mutex
	m  map[string]map[string]string
}

const revisionMemoSize = 512

var revisions revisionMemo

func (c *revisionMemo) lookup(raw string) map[string]string {
	c.mu.Lock()
	v, ok := c.m[raw]
	c.mu.Unlock()
	if ok {
		return v
	}
	v = parseRevisions(raw)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= revisionMemoSize {
		c.m = make(map[string]map[string]string, revisionMemoSize)
	}
	c.m[raw] = v
	c.mu.Unlock()
	return v
}

// InjectedNames returns the SidecarSet names in a pod's
// apps.deckhand.dev/sidecarsets annotation.
func InjectedNames(annotations map[string]string) []string {
	v := annotations[deckhandv1alpha1.AnnotationSidecarSetInjected]
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// IsInjected reports whether a pod's annotations record an injection by
// the SidecarSet called name.
func IsInjected(annotations map[string]string, name string) bool {
	v := annotations[deckhandv1alpha1.AnnotationSidecarSetInjected]
	for v != "" {
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

// Annotations renders r as the three annotation values (injected list,
// hash, hash without image). The output is deterministic (sorted by name).
func (r PodRecord) Annotations() (injected, hash, hashWithoutImage string) {
	names := make([]string, 0, len(r.Hash))
	for n := range r.Hash {
		names = append(names, n)
	}
	sort.Strings(names)
	h := make([]byte, 0, 64*len(names))
	w := make([]byte, 0, 40*len(names))
	h = append(h, '{')
	w = append(w, '{')
	for i, n := range names {
		if i > 0 {
			h = append(h, ',')
			w = append(w, ',')
		}
		e := r.Hash[n]
		h = strconv.AppendQuote(h, n)
		h = append(h, `:{"hash":`...)
		h = strconv.AppendQuote(h, e.Hash)
		if len(e.Containers) > 0 {
			h = append(h, `,"containers":[`...)
			for j, c := range e.Containers {
				if j > 0 {
					h = append(h, ',')
				}
				h = strconv.AppendQuote(h, c)
			}
			h = append(h, ']')
		}
		h = append(h, '}')
		w = strconv.AppendQuote(w, n)
		w = append(w, `:{"hash":`...)
		w = strconv.AppendQuote(w, r.HashWithoutImage[n].Hash)
		w = append(w, '}')
	}
	h = append(h, '}')
	w = append(w, '}')
	return strings.Join(names, ","), string(h), string(w)
}
