// Package typedinject is SidecarSet pod injection written the ordinary way:
// on a decoded corev1.Pod, with typed code. It is the reference that the
// webhook's hand-written JSON fast path (internal/podjson) is fuzzed
// against (test/fuzz) and measured against (test/bench): decode, Inject,
// encode and controller-runtime's JSON diff must come to the same pod as
// the fast path's patch.
//
// It shares with the webhook only what is not under test: which
// SidecarSets select the pod (sidecarcontrol.Lister) and the pod's
// injection record (sidecarcontrol.PodRecord).
package typedinject

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podjson"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// Inject injects into pod, in namespace ns, every unpaused SidecarSet of l
// that selects it, as the pod webhook does.
func Inject(l *sidecarcontrol.Lister, ns string, pod *corev1.Pod) {
	if pod.Annotations[deckhandv1alpha1.SidecarSetSkipInjectionAnnotation] == "true" {
		return
	}
	cands, _ := l.Candidates(ns)
	in := injector{orig: pod.DeepCopy(), record: sidecarcontrol.ReadPodRecord(pod.Annotations), allow: l.PodMetadataAllowlist()}
	for _, s := range cands {
		if !s.Spec.InjectionStrategy.Paused && l.Matches(s, ns, pod.Labels) {
			in.add(s, l.Compiled(s))
		}
	}
	for k, v := range in.annotations {
		if old, ok := pod.Annotations[k]; !ok || old != v {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
	}
	if !in.changed {
		return
	}
	pod.Spec.InitContainers = concat(in.beforeInit, in.orig.Spec.InitContainers, in.afterInit)
	pod.Spec.Containers = concat(in.before, in.orig.Spec.Containers, in.after)
	pod.Spec.Volumes = append(pod.Spec.Volumes, in.volumes...)
	pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, in.secrets...)
	in.record.Apply(pod)
	in.hot.apply(pod)
}

func concat(lists ...[]corev1.Container) []corev1.Container {
	var out []corev1.Container
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

type injector struct {
	orig                              *corev1.Pod
	record                            sidecarcontrol.PodRecord
	beforeInit, afterInit             []corev1.Container
	before, after                     []corev1.Container
	volumes                           []corev1.Volume
	secrets                           []corev1.LocalObjectReference
	addedNames, addedVols, addedSecrs []string
	changed                           bool
	hot                               hotAnnotations
	// annotations are the pod's as patchPodMetadata leaves them (nil until
	// a SidecarSet has some); allow is the manager's allowlist.
	annotations map[string]string
	allow       sidecarcontrol.MetadataAllowlist
	// cur is the SidecarSet being added, compiled (its resourcesPolicy
	// programs; the arithmetic has its own table test).
	cur *sidecarcontrol.Compiled
}

func (in *injector) has(name string) bool {
	for _, list := range [][]corev1.Container{in.orig.Spec.Containers, in.orig.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return true
			}
		}
	}
	return false
}

func (in *injector) add(s *deckhandv1alpha1.SidecarSet, c *sidecarcontrol.Compiled) {
	// Whole or not at all: a container name the pod has (and the record does
	// not give to s) or another SidecarSet adds keeps s out.
	owned := in.record.Containers(s.Name)
	for _, n := range c.ContainerNames {
		if slices.Contains(in.addedNames, n) || (in.has(n) && !slices.Contains(owned, n)) {
			return
		}
	}
	in.cur = c
	added := false
	for _, group := range []struct {
		list          []deckhandv1alpha1.SidecarContainer
		before, after *[]corev1.Container
	}{
		{s.Spec.InitContainers, &in.beforeInit, &in.afterInit},
		{hotExpanded(s), &in.before, &in.after},
	} {
		for i := range group.list {
			sc := &group.list[i]
			if in.has(sc.Name) || slices.Contains(in.addedNames, sc.Name) {
				continue
			}
			in.addedNames = append(in.addedNames, sc.Name)
			if sc.PodInjectPolicy == deckhandv1alpha1.AfterAppContainer {
				*group.after = append(*group.after, in.container(sc))
			} else {
				*group.before = append(*group.before, in.container(sc))
			}
			added = true
		}
	}
	in.hot.add(s, in.has)
	for i := range s.Spec.Volumes {
		v := s.Spec.Volumes[i]
		if !slices.ContainsFunc(in.orig.Spec.Volumes, func(o corev1.Volume) bool { return o.Name == v.Name }) && !slices.Contains(in.addedVols, v.Name) {
			in.addedVols = append(in.addedVols, v.Name)
			in.volumes = append(in.volumes, *v.DeepCopy())
			added = true
		}
	}
	for _, ps := range s.Spec.ImagePullSecrets {
		if !slices.Contains(in.orig.Spec.ImagePullSecrets, ps) && !slices.Contains(in.addedSecrs, ps.Name) {
			in.addedSecrs = append(in.addedSecrs, ps.Name)
			in.secrets = append(in.secrets, ps)
			added = true
		}
	}
	if hash, _ := in.record.Revisions(s.Name); added || !in.record.HasRevision(s.Name) || hash != c.Hash {
		in.record.Set(s.Name, c.Hash, c.HashWithoutImage, c.ContainerNames)
		in.changed = true
	}
	if len(s.Spec.PatchPodMetadata) > 0 {
		if in.annotations == nil {
			in.annotations = map[string]string{}
			for k, v := range in.orig.Annotations {
				in.annotations[k] = v
			}
		}
		patchMetadata(in.annotations, s, in.allow)
	}
}

// container is the sidecar as injected: its env with the transferred
// variables of the pod's containers, its mounts followed by the app
// containers' mounts when it shares volumes.
func (in *injector) container(sc *deckhandv1alpha1.SidecarContainer) corev1.Container {
	c := *sc.Container.DeepCopy()
	for _, t := range sc.TransferEnv {
		// A pod without the label or annotation sourceContainerNameFrom
		// names transfers nothing (not the env of a container without a name).
		name := in.sourceName(t)
		if name == "" {
			continue
		}
		src := in.sourceContainer(name)
		if src == nil {
			continue
		}
		names := t.EnvNames
		if len(names) == 0 {
			names = []string{t.EnvName}
		}
		for _, name := range names {
			i := slices.IndexFunc(src.Env, func(e corev1.EnvVar) bool { return e.Name == name })
			if i < 0 {
				continue
			}
			replaced := false
			for j := range c.Env {
				if c.Env[j].Name == name {
					c.Env[j], replaced = *src.Env[i].DeepCopy(), true
				}
			}
			if !replaced {
				c.Env = append(c.Env, *src.Env[i].DeepCopy())
			}
		}
	}
	if rp := in.cur.Resources[sc.Name]; rp != nil {
		apps := make([]sidecarcontrol.NamedResources, 0, len(in.orig.Spec.Containers))
		for _, app := range in.orig.Spec.Containers {
			apps = append(apps, sidecarcontrol.NamedResourcesOf(app.Name, &app.Resources))
		}
		if r, ok := rp.Compute(apps); ok {
			c.Resources = r
		}
	}
	if sc.ShareVolumeDevicePolicy != nil && sc.ShareVolumeDevicePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled {
		for _, app := range in.orig.Spec.Containers {
			for _, d := range app.VolumeDevices {
				if !slices.ContainsFunc(c.VolumeDevices, func(o corev1.VolumeDevice) bool { return o.DevicePath == d.DevicePath }) {
					c.VolumeDevices = append(c.VolumeDevices, d)
				}
			}
		}
	}
	if sc.ShareVolumePolicy.Type == deckhandv1alpha1.ShareVolumePolicyEnabled {
		for _, app := range in.orig.Spec.Containers {
			for _, m := range app.VolumeMounts {
				if !slices.ContainsFunc(c.VolumeMounts, func(o corev1.VolumeMount) bool { return o.MountPath == m.MountPath }) {
					c.VolumeMounts = append(c.VolumeMounts, *m.DeepCopy())
				}
			}
		}
	}
	return c
}

// sourceContainer is the pod's container called name (an app container
// before an init container), nil if none.
func (in *injector) sourceContainer(name string) *corev1.Container {
	for _, list := range [][]corev1.Container{in.orig.Spec.Containers, in.orig.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// sourceName is the name of the container t copies from: its
// sourceContainerName, or the pod label or annotation its
// sourceContainerNameFrom names.
func (in *injector) sourceName(t deckhandv1alpha1.TransferEnvVar) string {
	if t.SourceContainerName != "" || t.SourceContainerNameFrom == nil || t.SourceContainerNameFrom.FieldRef == nil {
		return t.SourceContainerName
	}
	kind, key, err := podjson.ParseMetadataFieldPath(t.SourceContainerNameFrom.FieldRef.FieldPath)
	if err != nil {
		return ""
	}
	if kind == "labels" {
		return in.orig.Labels[key]
	}
	return in.orig.Annotations[key]
}
