package inject

import (
	"fmt"

	"github.com/deckhand-dev/deckhand/internal/inject/podjson"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// applyResources gives every sidecar SidecarSet name (compiled as c) adds
// that has a resourcesPolicy the requests and limits its compiled programs
// compute from the pod's own containers. Compiled.Resources is nil for a
// SidecarSet without resourcesPolicy: such a SidecarSet costs nothing here.
func (p *planner) applyResources(name string, c *sidecarcontrol.Compiled) {
	for _, list := range [...][]podjson.Sidecar{p.additions.BeforeInit, p.additions.AfterInit, p.additions.Before, p.additions.After} {
		for i := range list {
			sc := &list[i]
			rp := c.Resources[sc.Spec.Name]
			if rp == nil || sc.Resources != nil {
				continue
			}
			r, ok := rp.Compute(p.appResources())
			if !ok {
				p.warnings = append(p.warnings, fmt.Sprintf("SidecarSet %s: no container of the pod matches the resourcesPolicy of sidecar %q, which gets no resources", name, sc.Spec.Name))
				continue
			}
			sc.Resources = podjson.EncodeResources(&r)
		}
	}
}

// appResources decodes the resources of the pod's own containers, once
// per admission. A container whose resources do not decode counts as
// asking for none.
func (p *planner) appResources() []sidecarcontrol.NamedResources {
	if p.apps != nil {
		return p.apps
	}
	p.apps = make([]sidecarcontrol.NamedResources, 0, len(p.pod.Containers))
	for i := range p.pod.Containers {
		r, _ := p.pod.ContainerCPUMemory(i)
		p.apps = append(p.apps, sidecarcontrol.NamedResources{Name: p.pod.Containers[i].Name, CPUMemory: r})
	}
	return p.apps
}
