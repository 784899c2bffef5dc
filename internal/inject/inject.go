package inject

import (
	"fmt"
	"slices"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject/podjson"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// injection is the outcome of inject.
type injection struct {
	patch    []byte   // a JSON patch, or nil
	injected []string // SidecarSets that added something
	// warnings tell the pod's creator which SidecarSets were not injected
	// because of a container name clash.
	warnings []string
}

// inject computes the JSON patch that injects every matching SidecarSet into
// pod, created by user (the request's userInfo.username), as a dry run or
// not: it selects the SidecarSets, resolves container name conflicts while
// it chooses what each one adds, updates the pod's record and writes the
// patch.
func inject(l *sidecarcontrol.Lister, encs *encodings, ns, user string, dryRun bool, pod *podjson.RawPod) (injection, error) {
	var res injection
	if l.SkipsAll(user, dryRun, pod.Annotations) {
		return res, nil
	}
	sets, byPolicy, err := l.Select(ns, pod.Labels, pod.Annotations)
	if err != nil {
		return res, err
	}
	// Note: a new pod's record is Deckhand's to write. Only the entries the
	// API server's policies wrote in this admission (the Policy-mode
	// SidecarSets that select the pod) are kept; the rest came with the pod.
	record, forged := sidecarcontrol.ReadPodRecord(pod.Annotations).Keep(func(name string) bool {
		return slices.Contains(byPolicy, name)
	})
	if len(sets) == 0 && !forged {
		return res, nil
	}
	p := planner{pod: pod, record: record, recordChanged: forged}
	for _, s := range sets {
		// The pinned revision's parts when injectionStrategy.revision says
		// so for this pod (pinned.go); s itself otherwise.
		is, ic := l.Injection(s, l.Compiled(s), pod.Labels)
		p.add(is, ic, encs.get(l, is, ic, is != s))
	}
	res.injected, res.warnings = p.injected, p.warnings
	if len(p.injected) > 0 && !slices.Contains(pod.ReadinessGates, string(inplacegate.ConditionType)) {
		p.additions.ReadinessGates = inPlaceGate
	}
	metadata := len(p.meta.keys)+len(p.labels.keys) > 0 && p.metadataChanged()
	if !p.recordChanged && !metadata {
		return res, nil
	}
	if p.recordChanged {
		p.writeRecord()
	}
	if metadata {
		p.writeMetadata()
	}
	res.patch, err = podjson.WritePatch(pod, &p.additions)
	return res, err
}

// inPlaceGate is the readiness gate an injected pod gets, encoded once: a
// SidecarSet's in-place update takes the pod out of its endpoints through
// it before it restarts the sidecars (internal/inplacegate).
var inPlaceGate = [][]byte{[]byte(`{"conditionType":"` + string(inplacegate.ConditionType) + `"}`)}

// planner decides, SidecarSet by SidecarSet, what injection adds to a pod
// and what the pod's record becomes.
type planner struct {
	pod       *podjson.RawPod
	record    sidecarcontrol.PodRecord
	additions podjson.Additions
	// addedContainers, addedVolumes and addedSecrets are the names that
	// SidecarSets earlier in name order add.
	addedContainers, addedVolumes, addedSecrets []string
	recordChanged                               bool
	injected, warnings                          []string
	// hot holds what the HotUpgrade sidecars added here write on the pod.
	hot hotAdditions
	// meta is what spec.patchPodMetadata sets (inject_metadata.go).
	meta metadataPlan
	// labels is what spec.patchPodMetadata sets among the labels.
	labels metadataPlan
	// apps are the pod's own containers' resources, decoded for the first
	// resourcesPolicy (inject_resources.go).
	apps []sidecarcontrol.NamedResources
}

// add plans the injection of s (compiled as c, encoded as enc).
func (p *planner) add(s *deckhandv1alpha1.SidecarSet, c *sidecarcontrol.Compiled, enc *encoded) {
	// A SidecarSet is injected whole or not at all, and only where every
	// container it names is its own: a container of the same name that the
	// pod brought itself (or that a SidecarSet earlier in name order adds)
	// wins, and the SidecarSet is then neither injected nor recorded.
	// Recorded, its controller would count the pod as its own and roll its
	// image onto a container it did not inject. The controller reports such
	// pods as not injected, naming the container.
	if name := p.clash(c.ContainerNames, p.record.Containers(s.Name)); name != "" {
		p.warnings = append(p.warnings, fmt.Sprintf("SidecarSet %s was not injected: the pod already has a container named %q", s.Name, name))
		return
	}
	added := p.addContainers(s.Spec.InitContainers, enc.fragments.InitContainers, &p.additions.BeforeInit, &p.additions.AfterInit)
	added = p.addContainers(c.Containers, enc.fragments.Containers, &p.additions.Before, &p.additions.After) || added
	if c.Hot != nil {
		p.addHotUpgrade(c, enc)
	}
	for i := range s.Spec.Volumes {
		name := s.Spec.Volumes[i].Name
		if !slices.Contains(p.pod.Volumes, name) && !slices.Contains(p.addedVolumes, name) {
			p.addedVolumes = append(p.addedVolumes, name)
			p.additions.Volumes = append(p.additions.Volumes, enc.fragments.Volumes[i])
			added = true
		}
	}
	for i, ps := range s.Spec.ImagePullSecrets {
		if !slices.Contains(p.pod.ImagePullSecrets, ps.Name) && !slices.Contains(p.addedSecrets, ps.Name) {
			p.addedSecrets = append(p.addedSecrets, ps.Name)
			p.additions.ImagePullSecrets = append(p.additions.ImagePullSecrets, enc.fragments.ImagePullSecrets[i])
			added = true
		}
	}
	p.updateRecord(s.Name, c, added)
	if c.PodMetadata != nil || c.PodLabels != nil {
		p.patchMetadata(s.Name, c)
	}
	if c.Resources != nil {
		p.applyResources(s.Name, c)
	}
	if added {
		p.injected = append(p.injected, s.Name)
	}
}

// clash returns the first of a SidecarSet's container names that is taken
// by a container it does not own ("" if none): the pod's own (present, and
// not among the containers the pod's record already lists for the
// SidecarSet) or one another SidecarSet adds in this admission.
func (p *planner) clash(names, recorded []string) string {
	for _, n := range names {
		if slices.Contains(p.addedContainers, n) || (p.pod.HasContainer(n) && !slices.Contains(recorded, n)) {
			return n
		}
	}
	return ""
}

// addContainers plans the sidecars of list the pod does not have yet:
// before the app containers or after them, as each one's policy says.
func (p *planner) addContainers(list []deckhandv1alpha1.SidecarContainer, frags []podjson.ContainerFragment, before, after *[]podjson.Sidecar) bool {
	added := false
	for i := range list {
		sc := &list[i]
		if p.pod.HasContainer(sc.Name) || slices.Contains(p.addedContainers, sc.Name) {
			continue
		}
		p.addedContainers = append(p.addedContainers, sc.Name)
		side := podjson.Sidecar{Spec: sc, Fragment: &frags[i]}
		if sc.PodInjectPolicy == deckhandv1alpha1.AfterAppContainer {
			*after = append(*after, side)
		} else {
			*before = append(*before, side)
		}
		added = true
	}
	return added
}

// updateRecord records s at its current revision when it added something
// or the pod's record does not show that revision yet.
func (p *planner) updateRecord(name string, c *sidecarcontrol.Compiled, added bool) {
	if hash, _ := p.record.Revisions(name); !added && p.record.HasRevision(name) && hash == c.Hash {
		return
	}
	p.record.Set(name, c.Hash, c.HashWithoutImage, c.ContainerNames)
	p.recordChanged = true
}

// writeRecord sets the record's annotations in the patch, or removes them
// when the record names no SidecarSet (a record the pod came with that
// named none Deckhand keeps).
func (p *planner) writeRecord() {
	if p.record.IsEmpty() {
		for _, k := range []string{deckhandv1alpha1.SidecarSetInjectedAnnotation, deckhandv1alpha1.SidecarSetHashAnnotation, deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation} {
			if _, ok := p.pod.Annotations[k]; ok {
				p.additions.RemovedAnnotations = append(p.additions.RemovedAnnotations, k)
			}
		}
		return
	}
	injected, hash, withoutImage := p.record.Values()
	p.additions.Annotations = append(p.additions.Annotations,
		podjson.Annotation{Key: deckhandv1alpha1.SidecarSetInjectedAnnotation, Value: injected},
		podjson.Annotation{Key: deckhandv1alpha1.SidecarSetHashAnnotation, Value: hash},
		podjson.Annotation{Key: deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation, Value: withoutImage},
	)
	p.writeHotUpgrade()
}
