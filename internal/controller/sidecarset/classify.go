package sidecarset

import (
	"context"
	"encoding/json"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/podcache"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// observePods lists the active pods the SidecarSet selects from the cache
// and classifies them.
func (r *Reconciler) observePods(ctx context.Context, sc *scope) (ctrl.Result, error) {
	s, c := sc.set, sc.compiled
	if c.Selector.Empty() {
		return ctrl.Result{}, nil
	}
	lister := r.Pods
	if lister == nil { // a Reconciler without SetupWithManager (unit tests)
		lister = podcache.ListerFromReader(r.Client)
	}
	selected, err := lister.Select(ctx, s.Spec.Namespace, c.Selector)
	if err != nil {
		return ctrl.Result{}, err
	}
	pods, terminating := reachable(r.Lister, s, c, selected)
	mem := sc.memory
	sc.observed = mem.recreates.observe(pods, terminating, sc.now)
	in := classifyInput{set: s, compiled: c, now: sc.now, deferredTimeout: r.ResizeDeferredTimeout, resizeRefused: mem.recreates.refusedResizes(),
		running: r.Lister.RunningRevisions(s)}
	sc.pods = mem.classifyCache(s).classifyPods(in, pods)
	pending := r.observeUpdates(s.Name, sc.pods)
	if len(pending) > 0 || len(sc.observed.lagging) > 0 {
		for _, st := range sc.pods {
			_, updating := pending[string(st.pod.UID)]
			_, closing := pending[gateKey(st.pod)]
			if updating || closing || sc.observed.lagging[st.pod.UID] {
				st.pending = true
				sc.pending++
			}
		}
	}
	if sc.pending > 0 {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// reachable splits the pods a SidecarSet's selector selects into the active
// ones it reaches (its namespaces, no protected one) and the terminating
// ones; the rest it ignores.
func reachable(l *sidecarcontrol.Lister, s *deckhandv1alpha1.SidecarSet, c *sidecarcontrol.Compiled, selected []*corev1.Pod) (active, terminating []*corev1.Pod) {
	active = make([]*corev1.Pod, 0, len(selected))
	for _, p := range selected {
		if l.IsProtectedNamespace(p.Namespace) || !c.MatchesNamespace(s, p.Namespace, l.NamespaceLabels) {
			continue
		}
		switch {
		case podActive(p):
			active = append(active, p)
		case terminatingPod(p):
			terminating = append(terminating, p)
		}
	}
	return active, terminating
}

// observeUpdates lowers the SidecarSet's update expectations by what the
// cached pods show (a pod that is gone or no longer active will never show
// it) and returns those still pending: a pod's UID while it is expected at
// a new revision, its gateKey while its in-place update gate is expected
// closed.
func (r *Reconciler) observeUpdates(name string, pods []*podState) map[string]string {
	updates := r.memory.updates
	want := updates.PendingUpdates(name)
	if len(want) == 0 {
		return nil
	}
	for _, p := range pods {
		if key := string(p.pod.UID); want[key] != "" {
			delete(want, key)
			hash, _ := p.record.Revisions(name)
			updates.UpdateObserved(name, key, hash)
		}
		if key := gateKey(p.pod); want[key] != "" {
			delete(want, key)
			updates.UpdateObserved(name, key, string(inplacegate.Status(p.pod)))
		}
	}
	for key := range want {
		updates.UpdateAbandoned(name, key)
	}
	return updates.PendingUpdates(name)
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
// was 50,000 allocations a reconcile at 50,000 pods. The pod's injection
// record is parsed here, once, and kept on the state.
func classify(in classifyInput, pod *corev1.Pod, st *podState) {
	s, c := in.set, in.compiled
	closed := inplacegate.Closed(pod)
	*st = podState{pod: pod, record: sidecarcontrol.ReadPodRecord(pod.Annotations), ready: podutil.IsPodReady(pod) && !closed, gateClosed: closed,
		inScope: true, controlled: recreatedByController(pod)}
	if c.UpdateSelector != nil {
		st.inScope = c.UpdateSelector.Matches(labelSet(pod.Labels))
	}
	rec := &st.record
	if !rec.Has(s.Name) || !hasContainers(pod, rec.Containers(s.Name)) {
		st.clash = clashingContainer(c.ContainerNames, pod)
		switch {
		case st.clash != "":
			st.stage = stageNameClash
		case sidecarcontrol.OptedOut(s, pod.Annotations) || s.Spec.InjectionStrategy.Paused:
			st.stage = stageOptedOut
		default:
			st.stage = stageNotInjected
		}
		return
	}
	var hot hotProgress
	if c.Hot != nil {
		hot = hotProgressOf(s, pod)
		st.hotUpgrading = hot.upgrading
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
	if hash != c.Hash && (!known || running.Hash != c.RunningHash) {
		switch {
		case withoutImage == c.HashWithoutImage || known && running.WithoutImage == c.RunningHashWithoutImage:
			st.stage = stageImagesBehind
		case !refused && sidecarcontrol.ResizeOnly(&s.Spec, pod, withoutImage, running.WithoutImage):
			st.stage = stageResourcesBehind
		default:
			st.stage = stageSpecBehind
		}
		return
	}
	updated := sidecarsRunLatest(s, pod)
	if c.Hot != nil {
		updated = updated && hot.workingRunsLatest
		st.hotStepDue = hot.stepDue
	}
	// The resize annotation names the revision the pod was updated to,
	// which is current without being the latest hash when the SidecarSet
	// changed since only in run-once init containers.
	if resizedTo(pod, s.Name) == hash {
		due := !sidecarResourcesMatch(s, pod)
		state, since := podutil.PodResizeState(pod, rec.Containers(s.Name))
		switch {
		case due:
			st.resize = resizeDue
		case state != podutil.ResizeDone:
			st.resize = resizeWaiting
		default:
			st.resize = resizeDone
		}
		if refused && due || state == podutil.ResizeInfeasible ||
			state == podutil.ResizeDeferred && in.now.Sub(since) >= in.deferredTimeout {
			st.stage = stageResizeFailed
			return
		}
		updated = updated && st.resize == resizeDone
	}
	st.stage = stageRollingOut
	if updated {
		st.stage = stageUpdated
	}
}

// hasContainers reports whether pod has every container (or init
// container) named in names. A record that names a sidecar the pod does not
// have does not make the pod injected: the record may have come with the
// pod, or the container may have been dropped since.
func hasContainers(pod *corev1.Pod, names []string) bool {
	for _, n := range names {
		if !podutil.HasContainer(pod, n) {
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
		if c := podutil.FindContainer(pod.Spec.Containers, s.Spec.Containers[i].Name); c != nil && !podutil.SameCPUMemory(&c.Resources, &s.Spec.Containers[i].Resources) {
			return false
		}
	}
	for i := range s.Spec.InitContainers {
		sc := &s.Spec.InitContainers[i]
		if !podutil.IsNativeSidecar(&sc.Container) {
			continue
		}
		if c := podutil.FindContainer(pod.Spec.InitContainers, sc.Name); c != nil && !podutil.SameCPUMemory(&c.Resources, &sc.Resources) {
			return false
		}
	}
	return true
}

// clashingContainer returns the first of the names a SidecarSet injects
// (its compiled ContainerNames: a HotUpgrade sidecar's two containers) that
// pod already has as a container or init container, "" if none.
func clashingContainer(names []string, pod *corev1.Pod) string {
	for _, n := range names {
		if podutil.HasContainer(pod, n) {
			return n
		}
	}
	return ""
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
	c := podutil.FindContainer(specs, sc.Name)
	if c == nil {
		return true // the pod does not have it: nothing to roll
	}
	return c.Image == sc.Image && podutil.RunsReady(statuses, sc.Name, sc.Image)
}

// podActive reports whether pod counts for a SidecarSet at all.
func podActive(pod *corev1.Pod) bool { return podutil.IsPodActive(pod) }

func labelSet(m map[string]string) labels.Set { return labels.Set(m) }
