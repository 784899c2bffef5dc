package sidecarset

import (
	"maps"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podjson"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// hotAdditions are the annotations the HotUpgrade sidecars injected in one
// admission write: their working slots and their slots' versions.
type hotAdditions struct {
	working  map[string]string
	versions []podjson.Annotation
}

// addHotUpgrade plans the annotations of c's HotUpgrade sidecars whose
// containers this admission adds. A pod that has them already (its record
// gives them to the SidecarSet) keeps its working slot and versions.
func (p *planner) addHotUpgrade(c *sidecarcontrol.Compiled) {
	for i := range c.Hot {
		h := &c.Hot[i]
		if p.pod.HasContainer(h.First) {
			continue
		}
		if p.hot.working == nil {
			p.hot.working = map[string]string{}
		}
		p.hot.working[h.Name] = h.First
		for _, kv := range h.Versions {
			p.hot.versions = append(p.hot.versions, podjson.Annotation{Key: kv[0], Value: kv[1]})
		}
	}
}

// writeHotUpgrade sets the planned HotUpgrade annotations in the patch:
// the working slots merged into those the pod records already.
func (p *planner) writeHotUpgrade() {
	if p.hot.working == nil {
		return
	}
	working := sidecarcontrol.WorkingContainers(p.pod.Annotations)
	maps.Copy(working, p.hot.working)
	p.additions.Annotations = append(p.additions.Annotations, podjson.Annotation{
		Key: deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation, Value: sidecarcontrol.RenderWorkingContainers(working)})
	p.additions.Annotations = append(p.additions.Annotations, p.hot.versions...)
}
