package inject

import (
	"maps"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject/podjson"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// hotAdditions are the annotations the HotUpgrade sidecars injected in one
// admission write: their working containers and their versions.
type hotAdditions struct {
	// whole is the pre-rendered annotations of the one SidecarSet whose
	// HotUpgrade sidecars were all added, into a pod that records no
	// working container: the common case, which needs no map and no
	// encoding per pod.
	whole []podjson.Annotation
	// working and versions are the general case: several SidecarSets, a
	// pod that records working containers already, or sidecars the pod
	// has already.
	working  map[string]string
	versions []podjson.Annotation
}

// addHotUpgrade plans the annotations of c's HotUpgrade sidecars (encoded as enc) whose
// containers this admission adds. A pod that has them already (its record
// gives them to the SidecarSet) keeps its working container and versions.
func (p *planner) addHotUpgrade(c *sidecarcontrol.Compiled, enc *encoded) {
	all := true
	for i := range c.Hot {
		if p.pod.HasContainer(c.Hot[i].First) {
			all = false
		}
	}
	_, recorded := p.pod.Annotations[deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation]
	if all && !recorded && p.hot.whole == nil && p.hot.working == nil {
		p.hot.whole = enc.hotAnnotations
		return
	}
	if p.hot.whole != nil {
		// A second SidecarSet: fall back to the general case for both.
		p.hot.working = sidecarcontrol.WorkingContainers(map[string]string{
			deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation: p.hot.whole[0].Value})
		p.hot.versions = append(p.hot.versions, p.hot.whole[1:]...)
		p.hot.whole = nil
	}
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
// the working containers merged into those the pod records already.
func (p *planner) writeHotUpgrade() {
	if p.hot.whole != nil {
		p.additions.Annotations = append(p.additions.Annotations, p.hot.whole...)
		return
	}
	if p.hot.working == nil {
		return
	}
	working := sidecarcontrol.WorkingContainers(p.pod.Annotations)
	maps.Copy(working, p.hot.working)
	p.additions.Annotations = append(p.additions.Annotations, podjson.Annotation{
		Key: deckhandv1alpha1.SidecarSetWorkingHotUpgradeContainerAnnotation, Value: sidecarcontrol.RenderWorkingContainers(working)})
	p.additions.Annotations = append(p.additions.Annotations, p.hot.versions...)
}
