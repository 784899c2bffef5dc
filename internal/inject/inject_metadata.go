package inject

import (
	"fmt"

	"github.com/deckhand-dev/deckhand/internal/inject/podjson"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// metadataPlan is what spec.patchPodMetadata does to a pod's annotations
// (or labels) in one admission: the values set so far, over the pod's own,
// so that a SidecarSet later in name order sees what earlier ones set
// (Retain keeps it, Overwrite replaces it, MergePatchJson merges into it).
type metadataPlan struct {
	values map[string]string
	keys   []string // in the order first set
}

// get returns the value as the SidecarSets planned so far leave it over
// base, the pod's own annotations or labels.
func (m *metadataPlan) get(base map[string]string, key string) (string, bool) {
	if v, ok := m.values[key]; ok {
		return v, true
	}
	v, ok := base[key]
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

// changed reports whether the plan changes a value of base.
func (m *metadataPlan) changed(base map[string]string) bool {
	for _, k := range m.keys {
		if v, ok := base[k]; !ok || v != m.values[k] {
			return true
		}
	}
	return false
}

// changes returns the planned entries whose value changes base, in the
// order they were first set.
func (m *metadataPlan) changes(base map[string]string) []podjson.Annotation {
	var out []podjson.Annotation
	for _, k := range m.keys {
		v := m.values[k]
		if old, ok := base[k]; ok && old == v {
			continue
		}
		out = append(out, podjson.Annotation{Key: k, Value: v})
	}
	return out
}

// patchMetadata plans the annotations and labels of SidecarSet name
// (compiled as c). Compiled.PodMetadata and PodLabels hold only allowed
// keys, decided once per generation: a SidecarSet without patchPodMetadata
// costs nothing here.
func (p *planner) patchMetadata(name string, c *sidecarcontrol.Compiled) {
	get := func(k string) (string, bool) { return p.meta.get(p.pod.Annotations, k) }
	for _, k := range sidecarcontrol.ApplyPodMetadata(c.PodMetadata, get, p.meta.set) {
		p.warnings = append(p.warnings, fmt.Sprintf("SidecarSet %s did not merge into annotation %q: the pod's value is not a JSON object", name, k))
	}
	getLabel := func(k string) (string, bool) { return p.labels.get(p.pod.Labels, k) }
	sidecarcontrol.ApplyPodMetadata(c.PodLabels, getLabel, p.labels.set)
}

// metadataChanged reports whether the plan changes an annotation's or a
// label's value.
func (p *planner) metadataChanged() bool {
	return p.meta.changed(p.pod.Annotations) || p.labels.changed(p.pod.Labels)
}

// writeMetadata sets the planned annotations and labels whose value
// changes in the patch, in the order they were first set.
func (p *planner) writeMetadata() {
	p.additions.Annotations = append(p.additions.Annotations, p.meta.changes(p.pod.Annotations)...)
	p.additions.Labels = p.labels.changes(p.pod.Labels)
}
