package inject

import (
	"sync"
	"sync/atomic"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject/podjson"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// encoded is a compiled SidecarSet's injectable parts as the patch copies
// them, so that admitting a pod copies bytes instead of encoding
// containers again.
type encoded struct {
	// fragments are the init containers, containers (Compiled.Containers:
	// HotUpgrade sidecars expanded into their two slots), volumes and
	// image pull secrets, JSON-encoded.
	fragments *podjson.Fragments
	// hotAnnotations are the annotations injecting all of
	// Compiled.Hot into a pod that records no working container yet
	// writes: the working-container map, then each sidecar's versions; nil
	// without HotUpgrade sidecars.
	hotAnnotations []podjson.Annotation
}

// encode encodes s, compiled as c.
func encode(s *deckhandv1alpha1.SidecarSet, c *sidecarcontrol.Compiled) *encoded {
	// Every part of the spec but the containers is s's own.
	spec := s.Spec
	spec.Containers = c.Containers
	e := &encoded{fragments: podjson.EncodeFragments(&spec)}
	if c.Hot != nil {
		e.hotAnnotations = hotAnnotations(c.Hot)
	}
	return e
}

// hotAnnotations renders what injecting every one of hot writes on a pod
// that records no working container yet.
func hotAnnotations(hot []sidecarcontrol.HotSidecar) []podjson.Annotation {
	working := make(map[string]string, len(hot))
	for _, h := range hot {
		working[h.Name] = h.First
	}
	out := []podjson.Annotation{{Key: deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation, Value: sidecarcontrol.RenderWorkingContainers(working)}}
	for _, h := range hot {
		for _, kv := range h.Versions {
			out = append(out, podjson.Annotation{Key: kv[0], Value: kv[1]})
		}
	}
	return out
}

// encodings holds the encoded form of every SidecarSet the handler has
// injected: by name, one for the SidecarSet itself and one for the
// revision its spec.injectionStrategy.revision pins, the two forms a pod
// can get. The Lister computes a Compiled once per SidecarSet generation
// (and per pinned revision and generation), so an entry is found by the
// Compiled's identity: a SidecarSet is encoded once per generation, on the
// first pod that gets it, and reading an entry takes no lock. The zero
// value is ready to use.
type encodings struct {
	byName sync.Map // SidecarSet name -> *encodedForms
}

type encodedForms struct {
	latest, pinned atomic.Pointer[encodedEntry]
}

type encodedEntry struct {
	compiled *sidecarcontrol.Compiled
	enc      *encoded
}

// get returns the encoded form of s, compiled as c; pinned says that s is
// the form of a pinned revision (Lister.Injection).
func (e *encodings) get(l *sidecarcontrol.Lister, s *deckhandv1alpha1.SidecarSet, c *sidecarcontrol.Compiled, pinned bool) *encoded {
	if s.Generation == 0 {
		// An object that never came from the API server (tests build
		// them): the Lister compiles it afresh every time, so keeping its
		// encoding would only hold memory.
		return encode(s, c)
	}
	v, ok := e.byName.Load(s.Name)
	if !ok {
		v, _ = e.byName.LoadOrStore(s.Name, &encodedForms{})
	}
	forms := v.(*encodedForms)
	slot := &forms.latest
	if pinned {
		slot = &forms.pinned
	}
	if en := slot.Load(); en != nil && en.compiled == c {
		return en.enc
	}
	enc := encode(s, c)
	slot.Store(&encodedEntry{compiled: c, enc: enc})
	e.forgetDeleted(l)
	return enc
}

// forgetDeleted drops the entries of SidecarSets l no longer holds. It runs
// on every encoding (once per generation of a SidecarSet), so an entry
// outlives its SidecarSet only until the next one changes.
func (e *encodings) forgetDeleted(l *sidecarcontrol.Lister) {
	e.byName.Range(func(k, _ any) bool {
		if l.Get(k.(string)) == nil {
			e.byName.Delete(k)
		}
		return true
	})
}
