// Package podcache trims the Pods Deckhand's informer cache holds to the
// fields its controllers read.
//
// Pods are most of what a cluster's cache holds, and most of a Pod is never
// read by Deckhand: volumes (every pod has a projected service-account token
// volume), probes, resources, env, tolerations, container states. Keeping
// them cost about 10 KB per cached pod in the first benchmark reports
// (docs/benchmark-analysis.md, "What was changed for these figures").
//
// What is kept, and who reads it:
//   - metadata: identity, labels, the annotations listed in readAnnotations
//     (revisions and in-place update state live there), owner references,
//     finalizers, deletion and creation timestamps: selectors, claiming,
//     expectations, deletion ranking;
//   - spec.nodeName: deletion ranking (unscheduled pods go first, pods on
//     crowded nodes next);
//   - spec.readinessGates, only the in-place update gate
//     (internal/inplacegate): whether an in-place update must take the pod
//     out of its endpoints first;
//   - name, image and restartPolicy of containers and init containers:
//     PodSet and SidecarSet in-place updates, native sidecar detection;
//   - the CPU and memory requests and limits of containers and init
//     containers, in their spec and as their status reports them: SidecarSet
//     in-place resizes (whether one applies, and when it is done);
//   - status.phase, the Ready condition's status and lastTransitionTime, the
//     PodResizePending and PodResizeInProgress conditions' status, reason and
//     lastTransitionTime, the apps.deckhand.dev/SidecarSetsUpdatable
//     condition's status, reason, message and lastTransitionTime, the
//     in-place update gate's status, message (who closed it) and
//     lastTransitionTime (the only conditions read), and the containers'
//     name/ready/started/image/imageID/restartCount: readiness, availability
//     (minReadySeconds), in-place update and resize completion, ranking, and
//     the SidecarSet controller's comparison of the pod condition it writes
//     with the one the pod carries (a write only when it changes).
//
// What many pods hold alike is shared between them (intern.go): labels,
// annotations, owner references, the trimmed containers and container
// statuses, their resource lists and the image names. Lister (list.go) lists the
// cached pods without copying them.
//
// A trimmed pod holds nothing of the decoded one (fresh.go): a decoded
// pod's strings are small allocations made among the hundreds of strings
// the rest of the pod holds, and a trimmed pod pointing at a few of them
// keeps the memory spans they share in use.
//
// The cached object is never written back whole: every pod write is a
// patch computed from the difference between two trimmed copies or built by
// hand, so fields dropped here are never cleared on the server. A new read of
// a pod field in a controller must add the field here (TestTrimKeeps lists
// them).
package podcache

import (
	"cmp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// lastApplied is kubectl's copy of the whole object, often the largest
// annotation a pod has; nothing in Deckhand reads it.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// readAnnotations are the pod annotations a controller reads from a cached
// pod, and the only ones the cache keeps: any other annotation is the pod
// owner's, up to 256 KiB of it per pod, and kept it would let a tenant's
// pods grow the manager until it is killed for memory. The pod webhook
// reads the pod in the admission request, not the cache. They are spelled
// out so that the cache does not import the API package (TestTrimKeeps
// checks them against its constants).
var readAnnotations = map[string]bool{
	// The injection record (SidecarSetInjectedAnnotation,
	// SidecarSetHashAnnotation, SidecarSetHashWithoutImageAnnotation): the
	// SidecarSet controller's revisions, updates, pod condition and status.
	"apps.deckhand.dev/sidecarsets":                   true,
	"apps.deckhand.dev/sidecarset-hash":               true,
	"apps.deckhand.dev/sidecarset-hash-without-image": true,
	// SidecarSetSkipInjectionAnnotation: pods opted out.
	"apps.deckhand.dev/sidecarset-skip-injection": true,
	// SidecarSetWorkingHotUpgradeContainerAnnotation: the working slot of a
	// hot-upgrade sidecar.
	"apps.deckhand.dev/sidecarset-working-hotupgrade-container": true,
	// SidecarSetResizeAnnotation: an in-place resize in progress.
	"apps.deckhand.dev/sidecarset-resize": true,
	// PodSetInPlaceHashAnnotation and PodSetInPlaceUpdateAnnotation: a
	// PodSet's in-place updates.
	"apps.deckhand.dev/podset-inplace-hash":   true,
	"apps.deckhand.dev/podset-inplace-update": true,
	// PodDeletionCostAnnotation: a PodSet's scale-down order.
	"controller.kubernetes.io/pod-deletion-cost": true,
}

// readAnnotationPrefixes are the prefixes of the per-container annotations
// the SidecarSet controller reads: the versions of the two slots of a
// hot-upgrade sidecar (SidecarSetVersionAnnotationPrefix,
// SidecarSetVersionAltAnnotationPrefix).
var readAnnotationPrefixes = []string{
	"version.sidecarset.apps.deckhand.dev/",
	"versionalt.sidecarset.apps.deckhand.dev/",
}

// maxReadAnnotationBytes bounds, keys and values together, the annotations
// the cache keeps of one pod. What Deckhand writes there is far smaller
// (about 3 KiB for twenty SidecarSets injected into one pod); more can only
// be a pod's owner writing Deckhand's keys, and the largest values are
// then left out of the cache, as if absent, until the rest fits.
const maxReadAnnotationBytes = 8 << 10

// isReadAnnotation reports whether a controller reads the annotation key.
func isReadAnnotation(k string) bool {
	if readAnnotations[k] {
		return true
	}
	for _, p := range readAnnotationPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// keptAnnotations returns which of the annotations the cache keeps: those
// isReadAnnotation accepts, within maxReadAnnotationBytes.
func keptAnnotations(annotations map[string]string) func(string) bool {
	size := 0
	for k, v := range annotations {
		if isReadAnnotation(k) {
			size += len(k) + len(v)
		}
	}
	if size <= maxReadAnnotationBytes {
		return isReadAnnotation
	}
	keys := make([]string, 0, len(readAnnotations))
	for k := range annotations {
		if isReadAnnotation(k) {
			keys = append(keys, k)
		}
	}
	// Largest first, then by key: the same pod always keeps the same ones.
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(len(annotations[b])+len(b), len(annotations[a])+len(a)); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	dropped := map[string]bool{}
	for _, k := range keys {
		if size <= maxReadAnnotationBytes {
			break
		}
		dropped[k] = true
		size -= len(k) + len(annotations[k])
	}
	return func(k string) bool { return isReadAnnotation(k) && !dropped[k] }
}

// Trim is a cache.TransformFunc: it returns a Pod holding only the fields
// listed in the package documentation, and any other object unchanged.
func Trim(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || trimmed(pod) {
		return obj, nil
	}
	return &corev1.Pod{
		TypeMeta:   freshTypeMeta(pod.TypeMeta),
		ObjectMeta: trimMeta(&pod.ObjectMeta),
		Spec: corev1.PodSpec{
			NodeName:       internString(pod.Spec.NodeName),
			ReadinessGates: trimReadinessGates(pod.Spec.ReadinessGates),
			Containers:     trimContainers(pod.Spec.Containers),
			InitContainers: trimContainers(pod.Spec.InitContainers),
		},
		Status: corev1.PodStatus{
			Phase:                 corev1.PodPhase(internString(string(pod.Status.Phase))),
			Conditions:            trimConditions(pod.Status.Conditions),
			ContainerStatuses:     trimStatuses(pod.Status.ContainerStatuses),
			InitContainerStatuses: trimStatuses(pod.Status.InitContainerStatuses),
		},
	}, nil
}

// trimmed reports whether pod is already a trimmed pod.
//
// NOTE: an informer that streams its initial list (client-go's watch-list)
// transforms every object twice: into its temporary store, and again when
// it replaces the queue's contents with that store's. Trimming a trimmed
// pod anew made a second trimmed copy of every pod at the end of the
// initial sync, both live until the first were dropped. Every pod the API
// server returns carries the fields it defaults (restartPolicy, dnsPolicy,
// schedulerName), and Trim keeps none of them; a pod from elsewhere without
// all three is kept whole, which costs memory and nothing else.
func trimmed(pod *corev1.Pod) bool {
	return pod.Spec.RestartPolicy == "" && pod.Spec.DNSPolicy == "" && pod.Spec.SchedulerName == ""
}

func trimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	name, uid, rv := freshStrings3(m.Name, string(m.UID), m.ResourceVersion)
	return metav1.ObjectMeta{
		Name:                       name,
		GenerateName:               internString(m.GenerateName),
		Namespace:                  internString(m.Namespace),
		UID:                        types.UID(uid),
		ResourceVersion:            rv,
		Generation:                 m.Generation,
		CreationTimestamp:          m.CreationTimestamp,
		DeletionTimestamp:          freshPtr(m.DeletionTimestamp),
		DeletionGracePeriodSeconds: freshPtr(m.DeletionGracePeriodSeconds),
		Labels:                     sharedStringMap(m.Labels, nil),
		Annotations:                sharedStringMap(m.Annotations, keptAnnotations(m.Annotations)),
		OwnerReferences:            sharedOwners(m.OwnerReferences),
		Finalizers:                 internStrings(m.Finalizers),
	}
}

func trimContainers(in []corev1.Container) []corev1.Container {
	return sharedSlice(containerLists, in, writeContainerKey, ownContainers)
}

func writeContainerKey(k *key, c *corev1.Container) {
	k.str(c.Name)
	k.str(c.Image)
	if c.RestartPolicy == nil {
		k.str("nil")
	} else {
		k.str(string(*c.RestartPolicy))
	}
	writeCPUMemory(k, c.Resources.Requests)
	writeCPUMemory(k, c.Resources.Limits)
}

func ownContainers(in []corev1.Container) []corev1.Container {
	out := make([]corev1.Container, len(in))
	for i := range in {
		out[i] = corev1.Container{Name: internString(in[i].Name), Image: internString(in[i].Image), RestartPolicy: freshRestartPolicy(in[i].RestartPolicy), Resources: trimResources(&in[i].Resources)}
	}
	return out
}

// trimResources keeps the CPU and memory requests and limits, the only
// resources a pod resize changes; most pods have none, and they cost
// nothing then. Equal lists are shared between pods (intern.go).
func trimResources(in *corev1.ResourceRequirements) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: cpuMemory(in.Requests), Limits: cpuMemory(in.Limits)}
}

// sidecarSetsUpdatable is deckhandv1alpha1.SidecarSetsUpdatablePodCondition,
// spelled out so that the cache does not import the API package.
const sidecarSetsUpdatable corev1.PodConditionType = "apps.deckhand.dev/SidecarSetsUpdatable"

// inPlaceUpdateGate is inplacegate.ConditionType, spelled out so that the
// cache does not import the controllers' packages.
const inPlaceUpdateGate corev1.PodConditionType = "apps.deckhand.dev/in-place-update-ready"

// inPlaceUpdateGateOnly is the readiness gates of every pod that lists the
// in-place update gate, shared.
var inPlaceUpdateGateOnly = []corev1.PodReadinessGate{{ConditionType: inPlaceUpdateGate}}

// trimReadinessGates keeps the in-place update gate only.
func trimReadinessGates(in []corev1.PodReadinessGate) []corev1.PodReadinessGate {
	for i := range in {
		if in[i].ConditionType == inPlaceUpdateGate {
			return inPlaceUpdateGateOnly
		}
	}
	return nil
}

// trimConditions keeps the Ready condition, the resize conditions, the
// SidecarSet pod condition and the in-place update gate only.
func trimConditions(in []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for i := range in {
		switch in[i].Type {
		case corev1.PodReady:
			out = append(out, corev1.PodCondition{Type: corev1.PodReady, Status: internStatus(in[i].Status), LastTransitionTime: in[i].LastTransitionTime})
		case corev1.PodResizePending, corev1.PodResizeInProgress:
			out = append(out, corev1.PodCondition{Type: corev1.PodConditionType(internString(string(in[i].Type))), Status: internStatus(in[i].Status),
				Reason: internString(in[i].Reason), LastTransitionTime: in[i].LastTransitionTime})
		case inPlaceUpdateGate:
			out = append(out, corev1.PodCondition{Type: inPlaceUpdateGate, Status: internStatus(in[i].Status), Message: internString(in[i].Message),
				LastTransitionTime: in[i].LastTransitionTime})
		case sidecarSetsUpdatable:
			out = append(out, corev1.PodCondition{Type: sidecarSetsUpdatable, Status: internStatus(in[i].Status), Reason: internString(in[i].Reason),
				Message: internString(in[i].Message), LastTransitionTime: in[i].LastTransitionTime})
		}
	}
	return out
}

func trimStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	return sharedSlice(statusLists, in, writeStatusKey, ownStatuses)
}

func writeStatusKey(k *key, c *corev1.ContainerStatus) {
	k.str(c.Name)
	k.bool(c.Ready)
	k.boolPtr(c.Started)
	k.str(c.Image)
	k.str(c.ImageID)
	k.int(int64(c.RestartCount))
	if c.Resources == nil {
		k.str("nil")
	} else {
		writeCPUMemory(k, c.Resources.Requests)
		writeCPUMemory(k, c.Resources.Limits)
	}
}

func ownStatuses(in []corev1.ContainerStatus) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, len(in))
	for i := range in {
		out[i] = corev1.ContainerStatus{
			Name: internString(in[i].Name), Ready: in[i].Ready, Started: freshPtr(in[i].Started),
			Image: internString(in[i].Image), ImageID: internString(in[i].ImageID), RestartCount: in[i].RestartCount,
		}
		if r := in[i].Resources; r != nil {
			trimmed := trimResources(r)
			out[i].Resources = &trimmed
		}
	}
	return out
}
