package sidecarset

import (
	"encoding/json"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/updateorder"
)

// podState is what the controller knows about one pod the SidecarSet selects.
type podState struct {
	pod *corev1.Pod
	// injected: the pod's annotations record this SidecarSet.
	injected bool
	// ready: the pod's Ready condition is True.
	ready bool
	// revision: the revision hash the pod's annotations record for this
	// SidecarSet, "" if none.
	revision string
	// revisionCurrent: the pod's annotations carry the latest revision.
	revisionCurrent bool
	// updated: revisionCurrent, and every sidecar container reports the
	// latest image and is ready.
	updated bool
	// upgradable: the pod's revision differs from the latest in images at
	// most, so an in-place update can bring it to the latest.
	upgradable bool
	// inScope: updateStrategy.selector (if any) selects the pod.
	inScope bool
	// pending: the controller updated the pod and its cache has not caught up.
	pending bool
	// clash, for a pod not injected: the name of a container the pod already
	// had under one of the SidecarSet's container names, which kept the pod
	// webhook from injecting it.
	clash string
	// optedOut, for a pod not injected: a new pod would not be injected
	// either (the pod carries the skip-injection annotation, or the
	// SidecarSet's injection is paused), so recreating it is pointless.
	optedOut bool

	// resize: not revisionCurrent, and reaching the latest revision takes a
	// change of sidecar CPU or memory resources (the pod resize subresource)
	// besides any image. upgradable is true.
	resize bool
	// resizeOwned: revisionCurrent, reached through a resize (the pod's
	// resize annotation names the latest revision), so the controller keeps
	// the sidecars' resources at the SidecarSet's.
	resizeOwned bool
	// resizeDue: resizeOwned, and the spec resources of a sidecar are not
	// the SidecarSet's yet (a resize request is still to be made).
	resizeDue bool
	// resizing: resizeOwned, and the kubelet has not reported the new
	// resources yet.
	resizing bool
	// resizeFailed: resizeOwned, and the resize is Infeasible, Deferred for
	// longer than the controller waits, or was refused: only recreating the
	// pod brings it to the latest revision.
	resizeFailed bool
	// controlled: the pod has a controller owner that recreates an evicted
	// pod (anything but a Job).
	controlled bool

	// hotStepDue: revisionCurrent, and a HotUpgrade sidecar has a step to
	// take (a switch to its new container, or a reset to the empty image).
	hotStepDue bool
	// hotUpgrading: a HotUpgrade sidecar's idle container does not run the
	// empty image (a hot upgrade is under way).
	hotUpgrading bool

	// conditionSynced: a reconcile found the pod's SidecarSetsUpdatable
	// condition as it should be. Kept with the state while neither the pod
	// nor the SidecarSet's spec changes (classifyCache), so the next
	// reconciles need not look again.
	conditionSynced bool
}

// needsRecreate reports whether only recreating the pod brings it to the
// latest revision: not injected (unless a new pod would not be injected
// either: a container name clash, the skip-injection annotation, paused
// injection), behind in more than images and resources, or a resize that
// failed.
func (p *podState) needsRecreate() bool {
	if !p.injected {
		return p.clash == "" && !p.optedOut
	}
	return !p.upgradable || p.resizeFailed
}

// unavailable reports whether the pod counts against maxUnavailable: not
// ready, or in the middle of an update.
func (p *podState) unavailable() bool {
	return !p.ready || p.pending || (p.revisionCurrent && !p.updated)
}

// rolloutInput is what planRollout decides from.
type rolloutInput struct {
	pods []*podState
	// gone is the number of pods that are unavailable without being in
	// pods: terminating, or evicted and not yet replaced by their
	// controller (counted under recreate: Evict only).
	gone int
	// maxUnavailable and partition are the strategy's, resolved.
	maxUnavailable, partition int
	// evict: updateStrategy.recreate is Evict.
	evict bool
	// order is the compiled priority and scatter strategy; nil keeps the
	// default order.
	order *updateorder.Order
}

// rolloutPlan is what the controller does to pods in one pass.
type rolloutPlan struct {
	// inPlace are updated in place: images patched, resources resized.
	inPlace []*podState
	// evict are evicted so that their controllers recreate them.
	evict []*podState
	// resize are at the latest revision with a resize request still to make
	// (a pass that stopped between the pod patch and the resize).
	resize []*podState
	// unmanaged need recreating but have no controller owner: reported,
	// never evicted.
	unmanaged []*podState
	// hotUpgrade are at the latest revision with a hot upgrade step to
	// take; the pods are already counted unavailable until it is done, so
	// it needs no budget.
	hotUpgrade []*podState
}

// planUpdates chooses the injected pods to update in place now, in order:
// planRollout without evictions.
func planUpdates(pods []*podState, maxUnavailable, partition int) []*podState {
	return planRollout(rolloutInput{pods: pods, maxUnavailable: maxUnavailable, partition: partition}).inPlace
}

// planRollout chooses what to do to which pods now. At most maxUnavailable
// pods may be unavailable (not ready, mid-update, or, under Evict,
// terminating or evicted and not yet replaced) at once, counting the ones
// that already are; updating or evicting a pod that is already not ready
// does not make things worse, so not-ready pods go first (within a
// priority, see sortCandidates) and do not use the budget. partition pods,
// the last in that order, are kept on their old revision. Under Evict the
// pods that missed injection belong to the rollout too (they are behind
// the latest revision); pods outside updateStrategy.selector are never
// touched.
func planRollout(in rolloutInput) rolloutPlan {
	var out rolloutPlan
	total, atLatest, unavailable := 0, 0, 0
	if in.evict {
		unavailable = in.gone
	}
	var candidates []*podState
	for _, p := range in.pods {
		if !p.injected && (!in.evict || !p.needsRecreate()) {
			continue
		}
		total++
		if p.revisionCurrent || p.pending {
			atLatest++
		}
		if p.unavailable() {
			unavailable++
		}
		if p.pending || !p.inScope {
			continue
		}
		switch {
		case p.revisionCurrent:
			// Already counted at the latest revision and unavailable while
			// its resize lasts: finishing it needs no budget.
			if p.resizeFailed && in.evict {
				if p.controlled {
					out.evict = append(out.evict, p)
				} else {
					out.unmanaged = append(out.unmanaged, p)
				}
			} else if p.resizeDue && !p.resizeFailed {
				out.resize = append(out.resize, p)
			}
			if p.hotStepDue {
				out.hotUpgrade = append(out.hotUpgrade, p)
			}
		case !p.needsRecreate():
			candidates = append(candidates, p)
		case in.evict && !p.controlled:
			out.unmanaged = append(out.unmanaged, p)
		case in.evict:
			candidates = append(candidates, p)
		}
	}
	allowed := total - in.partition - atLatest
	if allowed <= 0 || len(candidates) == 0 {
		return out
	}
	sortCandidates(candidates, in.order)
	for _, p := range candidates {
		if allowed == 0 {
			break
		}
		if p.ready {
			if unavailable >= in.maxUnavailable {
				break
			}
			unavailable++
		}
		if p.needsRecreate() {
			out.evict = append(out.evict, p)
		} else {
			out.inPlace = append(out.inPlace, p)
		}
		allowed--
	}
	return out
}

// defaultOrder sorts candidates not ready first, then by namespace and name.
func defaultOrder(candidates []*podState) {
	sort.SliceStable(candidates, func(i, j int) bool {
		if candidates[i].ready != candidates[j].ready {
			return !candidates[i].ready
		}
		a, b := candidates[i].pod, candidates[j].pod
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

// scaled resolves an int-or-percent against total, rounding percentages up.
func scaled(v *intstr.IntOrString, total, def int) int {
	if v == nil {
		return def
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, total, true)
	if err != nil {
		return def
	}
	return n
}

// classifyInput is what classify needs besides the pod.
type classifyInput struct {
	set      *deckhandv1alpha1.SidecarSet
	compiled *sidecarcontrol.Compiled
	// now and deferredTimeout decide when a Deferred resize has waited too long.
	now             time.Time
	deferredTimeout time.Duration
	// resizeRefused holds the pods the API server refused to resize to the
	// latest revision, by resizeKey.
	resizeRefused map[string]bool
	// running holds the RunningHashes of the SidecarSet's revisions, by
	// revision hash (sidecarcontrol.Lister.RunningRevisions).
	running map[string]sidecarcontrol.RunningRevision
}

// classify computes the podState of pod into st, which the caller
// allocates: one array for all of a reconcile's pods, where a state each
// was 50,000 allocations a reconcile at 50,000 pods.
func classify(in classifyInput, pod *corev1.Pod, st *podState) {
	s, c := in.set, in.compiled
	*st = podState{pod: pod, ready: podutil.IsPodReady(pod), inScope: true, controlled: recreatedByController(pod)}
	if c.UpdateSelector != nil {
		st.inScope = c.UpdateSelector.Matches(labelSet(pod.Labels))
	}
	rec := sidecarcontrol.ReadPodRecord(pod.Annotations)
	st.injected = rec.Has(s.Name) && hasContainers(pod, rec.Containers(s.Name))
	if !st.injected {
		st.clash = clashingContainer(c.ContainerNames, pod)
		st.optedOut = sidecarcontrol.OptedOut(s, pod.Annotations) || s.Spec.InjectionStrategy.Paused
		return
	}
	if c.Hot != nil {
		st.hotUpgrading = hotUpgrading(s, pod)
	}
	hash, withoutImage := rec.Revisions(s.Name)
	st.revision = hash
	// NOTE: the key is built only when there are refusals: a string per pod
	// and reconcile was an eighth of a reconcile's CPU at 50,000 pods.
	refused := len(in.resizeRefused) > 0 && in.resizeRefused[resizeKey(pod, c.Hash)]
	// A revision that differs from the latest only in run-once init
	// containers is current: nothing left in the pod could change
	// (sidecarcontrol.RunningHashes). Without the pod's ControllerRevision
	// (deleted, or never written because the spec changed again before a
	// reconcile) the full hashes decide.
	running, known := in.running[hash]
	st.revisionCurrent = hash == c.Hash || known && running.Hash == c.RunningHash
	st.upgradable = st.revisionCurrent || withoutImage == c.HashWithoutImage || known && running.WithoutImage == c.RunningHashWithoutImage
	if !st.upgradable && !refused && sidecarcontrol.ResizeOnly(&s.Spec, pod, withoutImage, running.WithoutImage) {
		st.upgradable, st.resize = true, true
	}
	if !st.revisionCurrent {
		return
	}
	st.updated = sidecarsRunLatest(s, pod)
	if c.Hot != nil {
		st.updated = st.updated && hotWorkingRunsLatest(s, pod)
		st.hotStepDue = hotStepDue(s, pod)
	}
	// The resize annotation names the revision the pod was updated to,
	// which is current without being the latest hash when the SidecarSet
	// changed since only in run-once init containers.
	if resizedTo(pod, s.Name) != hash {
		return
	}
	st.resizeOwned = true
	st.resizeDue = !sidecarResourcesMatch(s, pod)
	state, since := podutil.PodResizeState(pod, rec.Containers(s.Name))
	switch {
	case refused && st.resizeDue:
		st.resizeFailed = true
	case state == podutil.ResizeInfeasible:
		st.resizeFailed = true
	case state == podutil.ResizeDeferred && in.now.Sub(since) >= in.deferredTimeout:
		st.resizeFailed = true
	}
	st.resizing = st.resizeDue || state != podutil.ResizeDone
	st.updated = st.updated && !st.resizing
}

// hasContainers reports whether pod has every container (or init
// container) named in names. A record that names a sidecar the pod does not
// have does not make the pod injected: the record may have come with the
// pod, or the container may have been dropped since.
func hasContainers(pod *corev1.Pod, names []string) bool {
	for _, n := range names {
		if !hasContainer(pod, n) {
			return false
		}
	}
	return true
}

// resizeKey identifies a resize of pod to revision hash.
func resizeKey(pod *corev1.Pod, hash string) string { return string(pod.UID) + "/" + hash }

// recreatedByController reports whether pod has a controller owner that
// creates a new pod when this one is evicted. A Job counts an evicted pod
// as a failure, so its pods are not.
func recreatedByController(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOfNoCopy(pod)
	return ref != nil && ref.Kind != "Job"
}

// resizedTo returns the revision that the pod's resize annotation records
// for the SidecarSet called name, "" if none.
func resizedTo(pod *corev1.Pod, name string) string {
	raw := pod.Annotations[deckhandv1alpha1.SidecarSetResizeAnnotation]
	if raw == "" {
		return ""
	}
	m := map[string]string{}
	if json.Unmarshal([]byte(raw), &m) != nil {
		return ""
	}
	return m[name]
}

// sidecarResourcesMatch reports whether every sidecar container and native
// sidecar of s in pod asks for the SidecarSet's CPU and memory.
func sidecarResourcesMatch(s *deckhandv1alpha1.SidecarSet, pod *corev1.Pod) bool {
	for i := range s.Spec.Containers {
		if c := findContainer(pod.Spec.Containers, s.Spec.Containers[i].Name); c != nil && !podutil.SameCPUMemory(&c.Resources, &s.Spec.Containers[i].Resources) {
			return false
		}
	}
	for i := range s.Spec.InitContainers {
		sc := &s.Spec.InitContainers[i]
		if !podutil.IsNativeSidecar(&sc.Container) {
			continue
		}
		if c := findContainer(pod.Spec.InitContainers, sc.Name); c != nil && !podutil.SameCPUMemory(&c.Resources, &sc.Resources) {
			return false
		}
	}
	return true
}

func findContainer(list []corev1.Container, name string) *corev1.Container {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// clashingContainer returns the first of the names a SidecarSet injects
// (its compiled ContainerNames: a HotUpgrade sidecar's two containers) that
// pod already has as a container or init container, "" if none.
func clashingContainer(names []string, pod *corev1.Pod) string {
	for _, n := range names {
		if hasContainer(pod, n) {
			return n
		}
	}
	return ""
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return true
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return true
		}
	}
	return false
}

// sidecarsRunLatest reports whether every sidecar container of s in pod (and
// every native sidecar init container) has the SidecarSet's image in its
// spec and reports it, ready, in its status. Regular init containers have
// already run and are not checked.
func sidecarsRunLatest(s *deckhandv1alpha1.SidecarSet, pod *corev1.Pod) bool {
	for i := range s.Spec.Containers {
		if !containerRuns(&s.Spec.Containers[i], pod.Spec.Containers, pod.Status.ContainerStatuses) {
			return false
		}
	}
	for i := range s.Spec.InitContainers {
		sc := &s.Spec.InitContainers[i]
		if podutil.IsNativeSidecar(&sc.Container) && !containerRuns(sc, pod.Spec.InitContainers, pod.Status.InitContainerStatuses) {
			return false
		}
	}
	return true
}

func containerRuns(sc *deckhandv1alpha1.SidecarContainer, specs []corev1.Container, statuses []corev1.ContainerStatus) bool {
	found := false
	for i := range specs {
		if specs[i].Name == sc.Name {
			if specs[i].Image != sc.Image {
				return false
			}
			found = true
			break
		}
	}
	if !found {
		return true // the pod does not have it: nothing to roll
	}
	for i := range statuses {
		if statuses[i].Name == sc.Name {
			return statuses[i].Ready && podutil.ImageMatches(sc.Image, statuses[i])
		}
	}
	return false
}

// podActive reports whether pod counts for a SidecarSet at all.
func podActive(pod *corev1.Pod) bool { return podutil.IsPodActive(pod) }
