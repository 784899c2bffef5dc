package sidecarcontrol

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// Compiled is what one generation of a SidecarSet implies: parsed
// selectors, revision hashes, the containers injected and the per-pod
// policies compiled, as typed values; how a consumer encodes them is its
// own business. It is shared and must not be modified.
type Compiled struct {
	key derivedKey

	// Selector is spec.selector parsed; a SidecarSet whose selector does not
	// parse or is empty selects nothing.
	Selector labels.Selector
	// NamespaceSelector is spec.namespaceSelector parsed, nil if unset.
	NamespaceSelector labels.Selector
	// UpdateSelector is spec.updateStrategy.selector parsed, nil if unset.
	UpdateSelector labels.Selector
	// Hash is the revision: a hash of everything the SidecarSet injects.
	Hash string
	// HashWithoutImage is the same hash with every image left out.
	HashWithoutImage string
	// RunningHash and RunningHashWithoutImage are Hash and HashWithoutImage
	// with the run-once init containers left out (RunningHashes): what a
	// pod that has started can still be brought to.
	RunningHash, RunningHashWithoutImage string
	// ContainerNames are the names of the containers and init containers
	// the SidecarSet injects.
	ContainerNames []string
	// Containers are the containers injected: spec.containers itself,
	// unless a sidecar is HotUpgrade, which is injected as two containers
	// (InjectedContainers).
	Containers []deckhandv1alpha1.SidecarContainer
	// Hot are the HotUpgrade sidecars, with the annotations injection
	// writes for them; nil without any.
	Hot []HotSidecar
	// PodMetadata is spec.patchPodMetadata's annotations restricted to the
	// allowed keys; nil (nothing to do per pod) when the SidecarSet patches
	// none. PodLabels likewise for its labels.
	PodMetadata []MetadataPatch
	PodLabels   []MetadataPatch
	// Resources are the compiled resourcesPolicy programs by sidecar name;
	// nil when no sidecar has one.
	Resources map[string]*ResourcesProgram
}

// compile computes the Compiled form of s; s is not modified. Callers go
// through a Store, which computes it once per generation.
func compile(s *deckhandv1alpha1.SidecarSet, allow PodMetadataAllowlists) *Compiled {
	c := &Compiled{key: keyOf(s), Selector: labels.Nothing(), Containers: InjectedContainers(&s.Spec),
		PodMetadata: compileMetadata(s, allow.Annotations, false), PodLabels: compileMetadata(s, allow.Labels, true)}
	c.Hot = HotSidecars(&s.Spec, s.Generation)
	if sel := s.Spec.Selector; sel != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0) {
		if parsed, err := metav1.LabelSelectorAsSelector(sel); err == nil {
			c.Selector = parsed
		}
	}
	if s.Spec.NamespaceSelector != nil {
		parsed, err := metav1.LabelSelectorAsSelector(s.Spec.NamespaceSelector)
		if err != nil {
			parsed = labels.Nothing()
		}
		c.NamespaceSelector = parsed
	}
	if s.Spec.UpdateStrategy.Selector != nil {
		parsed, err := metav1.LabelSelectorAsSelector(s.Spec.UpdateStrategy.Selector)
		if err != nil {
			parsed = labels.Nothing()
		}
		c.UpdateSelector = parsed
	}
	c.Hash, c.HashWithoutImage = Hashes(&s.Spec)
	c.RunningHash, c.RunningHashWithoutImage = RunningHashes(&s.Spec)
	c.Resources = compileResources(s)
	for i := range s.Spec.InitContainers {
		c.ContainerNames = append(c.ContainerNames, s.Spec.InitContainers[i].Name)
	}
	for i := range c.Containers {
		c.ContainerNames = append(c.ContainerNames, c.Containers[i].Name)
	}
	return c
}

// hashInput is everything a SidecarSet injects into a pod.
type hashInput struct {
	InitContainers   []deckhandv1alpha1.SidecarContainer `json:"i,omitempty"`
	Containers       []deckhandv1alpha1.SidecarContainer `json:"c,omitempty"`
	Volumes          []corev1.Volume                     `json:"v,omitempty"`
	ImagePullSecrets []corev1.LocalObjectReference       `json:"p,omitempty"`
}

// Hashes returns the revision hash of spec (everything it injects) and the
// same hash with images left out.
func Hashes(spec *deckhandv1alpha1.SidecarSetSpec) (hash, withoutImage string) {
	in := hashInput{InitContainers: spec.InitContainers, Containers: spec.Containers, Volumes: spec.Volumes, ImagePullSecrets: spec.ImagePullSecrets}
	hash = hashJSON(in)
	in.InitContainers = withoutImages(spec.InitContainers)
	in.Containers = withoutImages(spec.Containers)
	withoutImage = hashJSON(in)
	return hash, withoutImage
}

// RunningHashes returns the hashes of Hashes with the run-once init
// containers of spec (those without restartPolicy Always) left out.
//
// A kubelet runs a plain init container once, before the app starts, and
// never again in the pod's life: a new image or command for it cannot reach
// a running pod, and patching it into the pod's spec would only make the
// next sandbox recreation run a revision nobody rolled out. So the revision
// hash (Hashes), which names ControllerRevisions and what new pods are
// injected with, covers them, while whether a running pod is at the latest
// revision, or can get there in place, is decided on these hashes: a pod
// whose revision differs from the latest only in its plain init containers
// has nothing left to update and counts as updated. They are derived from
// a revision's content (for a pod's recorded revision, from its
// ControllerRevision) rather than recorded on pods, so no pod or record
// format changes and pods injected before they existed are judged alike.
func RunningHashes(spec *deckhandv1alpha1.SidecarSetSpec) (hash, withoutImage string) {
	running := *spec
	running.InitContainers = nil
	for i := range spec.InitContainers {
		if podutil.IsNativeSidecar(&spec.InitContainers[i].Container) {
			running.InitContainers = append(running.InitContainers, spec.InitContainers[i])
		}
	}
	return Hashes(&running)
}

func withoutImages(cs []deckhandv1alpha1.SidecarContainer) []deckhandv1alpha1.SidecarContainer {
	out := make([]deckhandv1alpha1.SidecarContainer, len(cs))
	for i := range cs {
		out[i] = cs[i]
		out[i].Image = ""
	}
	return out
}

func hashJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		// The spec was decoded from JSON; it always encodes again.
		panic(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// MatchesNamespace reports whether s (compiled as c) can select pods in
// namespace ns by its spec. nsLabels looks a namespace's labels up (from
// the cache). Protected namespaces are the Lister's to exclude
// (Lister.MatchesNamespace).
func (c *Compiled) MatchesNamespace(s *deckhandv1alpha1.SidecarSet, ns string, nsLabels func(string) (map[string]string, bool)) bool {
	if s.Spec.Namespace != "" && s.Spec.Namespace != ns {
		return false
	}
	if c.NamespaceSelector != nil {
		l, ok := nsLabels(ns)
		if !ok {
			return false
		}
		if !c.NamespaceSelector.Matches(labels.Set(l)) {
			return false
		}
	}
	return true
}

// Matches reports whether s (compiled as c) selects a pod with podLabels in
// namespace ns.
func (c *Compiled) Matches(s *deckhandv1alpha1.SidecarSet, ns string, podLabels map[string]string, nsLabels func(string) (map[string]string, bool)) bool {
	return c.Selector.Matches(labels.Set(podLabels)) && c.MatchesNamespace(s, ns, nsLabels)
}
