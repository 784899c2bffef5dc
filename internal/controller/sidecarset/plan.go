package sidecarset

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// podState is what the controller knows about one pod the SidecarSet selects.
type podState struct {
	pod *corev1.Pod
	// injected: the pod's annotations record this SidecarSet.
	injected bool
	// ready: the pod's Ready condition is True.
	ready bool
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
}

// unavailable reports whether the pod counts against maxUnavailable: not
// ready, or in the middle of an update.
func (p *podState) unavailable() bool {
	return !p.ready || p.pending || (p.revisionCurrent && !p.updated)
}

// planUpdates chooses the injected pods to update in place now, in order.
// At most maxUnavailable pods may be unavailable (not ready or mid-update) at
// once, counting the ones that already are; updating a pod that is already
// not ready does not make things worse, so not-ready pods go first and
// do not use the budget. partition pods are kept on their old revision.
func planUpdates(pods []*podState, maxUnavailable, partition int) []*podState {
	total, atLatest, unavailable := 0, 0, 0
	var candidates []*podState
	for _, p := range pods {
		if !p.injected {
			continue
		}
		total++
		if p.revisionCurrent || p.pending {
			atLatest++
		}
		if p.unavailable() {
			unavailable++
		}
		if !p.revisionCurrent && !p.pending && p.upgradable && p.inScope {
			candidates = append(candidates, p)
		}
	}
	allowed := total - partition - atLatest
	if allowed <= 0 || len(candidates) == 0 {
		return nil
	}
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
	var out []*podState
	for _, p := range candidates {
		if allowed == 0 {
			break
		}
		if p.ready {
			if unavailable >= maxUnavailable {
				break
			}
			unavailable++
		}
		out = append(out, p)
		allowed--
	}
	return out
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

// classify computes the podState of pod for SidecarSet s (compiled as c).
func classify(s *deckhandv1alpha1.SidecarSet, c *sidecarcontrol.Compiled, pod *corev1.Pod) *podState {
	st := &podState{pod: pod, ready: podutil.IsPodReady(pod), inScope: true}
	rec := sidecarcontrol.ReadPodRecord(pod.Annotations)
	st.injected = rec.Has(s.Name)
	if !st.injected {
		st.clash = clashingContainer(s, pod)
		return st
	}
	hash, withoutImage := rec.Revisions(s.Name)
	st.revisionCurrent = hash == c.Hash
	st.upgradable = st.revisionCurrent || withoutImage == c.HashWithoutImage
	if c.UpdateSelector != nil {
		st.inScope = c.UpdateSelector.Matches(labelSet(pod.Labels))
	}
	if st.revisionCurrent {
		st.updated = sidecarsRunLatest(s, pod)
	}
	return st
}

// clashingContainer returns the first of s's container names that pod
// already has as a container or init container, "" if none.
func clashingContainer(s *deckhandv1alpha1.SidecarSet, pod *corev1.Pod) string {
	for _, list := range [][]deckhandv1alpha1.SidecarContainer{s.Spec.InitContainers, s.Spec.Containers} {
		for i := range list {
			if hasContainer(pod, list[i].Name) {
				return list[i].Name
			}
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
