// Package typedinject is SidecarSet pod injection written the ordinary way:
// on a decoded corev1.Pod, with typed code. It is the reference that the
// webhook's hand-written JSON fast path (internal/inject/podjson) is fuzzed
// against (test/fuzz) and measured against (test/bench): decode, Inject,
// encode and controller-runtime's JSON diff must come to the same pod as
// the fast path's patch.
//
// It shares with the webhook only what is not under test: which
// SidecarSets select the pod (sidecarcontrol.Lister.Select), the pod's
// injection record (sidecarcontrol.PodRecord) and which container and
// variables a transferEnv names (sidecarcontrol.TransferSource,
// TransferEnvNames).
package typedinject

import (
	"path"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// Inject injects into pod, in namespace ns, every unpaused SidecarSet of l
// that selects it and that it has not opted out of, as the pod webhook
// does for a pod created by anyone but Deckhand itself.
func Inject(l *sidecarcontrol.Lister, ns string, pod *corev1.Pod) {
	sets, byPolicy, _ := l.Select(ns, pod.Labels, pod.Annotations)
	// A new pod's record is Deckhand's to write: what came with the pod is
	// dropped, but for the entries of the SidecarSets injected by policy.
	record, forged := sidecarcontrol.ReadPodRecord(pod.Annotations).Keep(func(name string) bool { return slices.Contains(byPolicy, name) })
	in := injector{orig: pod.DeepCopy(), record: record, allow: l.PodMetadataAllowlist(), labelAllow: l.PodLabelAllowlist()}
	for _, s := range sets {
		in.add(s, l.Compiled(s))
	}
	for k, v := range in.annotations {
		if old, ok := pod.Annotations[k]; !ok || old != v {
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[k] = v
		}
	}
	for k, v := range in.labels {
		if old, ok := pod.Labels[k]; !ok || old != v {
			if pod.Labels == nil {
				pod.Labels = map[string]string{}
			}
			pod.Labels[k] = v
		}
	}
	if forged && in.record.IsEmpty() {
		delete(pod.Annotations, deckhandv1alpha1.SidecarSetInjectedAnnotation)
		delete(pod.Annotations, deckhandv1alpha1.SidecarSetHashAnnotation)
		delete(pod.Annotations, deckhandv1alpha1.SidecarSetHashWithoutImageAnnotation)
	} else if forged {
		in.record.Apply(pod)
	}
	if !in.changed {
		return
	}
	pod.Spec.InitContainers = concat(in.beforeInit, in.orig.Spec.InitContainers, in.afterInit)
	pod.Spec.Containers = concat(in.before, in.orig.Spec.Containers, in.after)
	pod.Spec.Volumes = append(pod.Spec.Volumes, in.volumes...)
	pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, in.secrets...)
	inplacegate.Add(&pod.Spec)
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
	// labels and labelAllow likewise for the pod's labels.
	labels     map[string]string
	labelAllow sidecarcontrol.MetadataAllowlist
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
		if in.labels == nil {
			in.labels = map[string]string{}
			for k, v := range in.orig.Labels {
				in.labels[k] = v
			}
		}
		patchLabels(in.labels, s, in.labelAllow)
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
		name := sidecarcontrol.TransferSource(&t, in.orig.Labels, in.orig.Annotations)
		if name == "" {
			continue
		}
		src := in.sourceContainer(name)
		if src == nil {
			continue
		}
		for _, name := range sidecarcontrol.TransferEnvNames(&t) {
			// The sidecar's own variable, or one transferred before, wins.
			if slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name }) {
				continue
			}
			i := slices.IndexFunc(src.Env, func(e corev1.EnvVar) bool { return e.Name == name })
			if i < 0 {
				continue
			}
			c.Env = append(c.Env, *src.Env[i].DeepCopy())
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
		shareMounts(&c, in.orig.Spec.Containers, sc.ShareVolumePolicy.Writable)
	}
	return c
}

// shareMounts appends to c the app containers' mounts: compared by cleaned
// path, none at or under a path c mounts itself, the first of two at one
// path, readOnly unless writable, with the env variables a subPathExpr
// names that c does not define copied from the mount's container.
func shareMounts(c *corev1.Container, apps []corev1.Container, writable bool) {
	var own []string
	for _, m := range c.VolumeMounts {
		own = append(own, path.Clean(m.MountPath))
	}
	var taken []string
	for _, app := range apps {
		for _, m := range app.VolumeMounts {
			p := path.Clean(m.MountPath)
			if slices.ContainsFunc(own, func(o string) bool { return p == o || o == "/" || strings.HasPrefix(p, o+"/") }) || slices.Contains(taken, p) {
				continue
			}
			taken = append(taken, p)
			m := *m.DeepCopy()
			if !writable {
				m.ReadOnly = true
			}
			c.VolumeMounts = append(c.VolumeMounts, m)
			for _, ref := range subPathVar.FindAllStringSubmatch(m.SubPathExpr, -1) {
				if slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == ref[1] }) {
					continue
				}
				if i := slices.IndexFunc(app.Env, func(e corev1.EnvVar) bool { return e.Name == ref[1] }); i >= 0 {
					c.Env = append(c.Env, *app.Env[i].DeepCopy())
				}
			}
		}
	}
}

var subPathVar = regexp.MustCompile(`\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)`)

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
