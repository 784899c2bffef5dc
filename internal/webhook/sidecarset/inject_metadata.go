package sidecarset

import (
	"fmt"

	"github.com/deckhand-dev/deckhand/internal/podjson"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// metadataPlan is what spec.patchPodMetadata does to a pod's annotations
// in one admission: the values set so far, over the pod's own, so that a
// SidecarSet later in name order sees what earlier ones set (Retain keeps
// it, Overwrite replaces it, MergePatchJson merges into it).
type metadataPlan struct {
	values map[string]string
	keys   []string // in the order first set
}

// get returns the annotation's value as the SidecarSets planned so far
// leave it.
func (m *metadataPlan) get(pod *podjson.RawPod, key string) (string, bool) {
	if v, ok := m.values[key]; ok {
		return v, true
	}
	v, ok := pod.Annotations[key]
	return v, ok
}

func (m *metadataPlan) set(key, value string) {
	if m.values == nil {
		m.values = make(map[string]string, 4)
	}
	if _, ok := m.values[key]; !ok {
		m.keys = append(m.keys, key)
	}
	m.values[key] = value
}

// patchMetadata plans the annotations of SidecarSet name (compiled as c).
// Compiled.PodMetadata holds only allowed keys, decided once per
// generation: a SidecarSet without patchPodMetadata costs nothing here.
func (p *planner) patchMetadata(name string, c *sidecarcontrol.Compiled) {
	get := func(k string) (string, bool) { return p.meta.get(p.pod, k) }
	for _, k := range sidecarcontrol.ApplyPodMetadata(c.PodMetadata, get, p.meta.set) {
		p.warnings = append(p.warnings, fmt.Sprintf("SidecarSet %s did not merge into annotation %q: the pod's value is not a JSON object", name, k))
	}
}

// metadataChanged reports whether the plan changes an annotation's value.
func (p *planner) metadataChanged() bool {
	for _, k := range p.meta.keys {
		if v, ok := p.pod.Annotations[k]; !ok || v != p.meta.values[k] {
			return true
		}
	}
	return false
}

// writeMetadata sets the planned annotations whose value changes in the
// patch, in the order they were first set.
func (p *planner) writeMetadata() {
	for _, k := range p.meta.keys {
		v := p.meta.values[k]
		if old, ok := p.pod.Annotations[k]; ok && old == v {
			continue
		}
		p.additions.Annotations = append(p.additions.Annotations, podjson.Annotation{Key: k, Value: v})
	}
}
