package podset

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/rolloutpreview"
)

// PreviewInput is what a PodSet rollout preview is computed from: the
// PodSet as it would be after a change, and its pods as they are.
type PreviewInput struct {
	// PodSet is the PodSet with the changed spec (its status as it is).
	PodSet *deckhandv1alpha1.PodSet
	// Pods are the PodSet's pods: those it controls; the preview keeps the
	// active ones.
	Pods []*corev1.Pod
	// Now is the time availability (minReadySeconds) is judged at.
	Now time.Time
}

// RolloutPreview is what the PodSet controller would do, sync after sync,
// to bring the PodSet's pods to its template and replicas.
type RolloutPreview struct {
	// Revision is the update revision (the template's hash).
	Revision string `json:"revision"`
	// MaxSurge, MaxUnavailable and Partition are the strategy's, resolved
	// against spec.replicas.
	MaxSurge       int `json:"maxSurge"`
	MaxUnavailable int `json:"maxUnavailable"`
	Partition      int `json:"partition"`
	// Steps is how many syncs it takes, each waiting for the pods of the
	// one before to be available.
	Steps int `json:"steps"`
	// Creates is the number of pods each sync creates, by step (index 0 is
	// step 1).
	Creates []int `json:"creates"`
	// Held says why the rollout does not move (spec.paused, type
	// OnDelete); the steps are then only the scaling.
	Held string `json:"held,omitempty"`
	// Pods are the existing pods in the order the syncs act on them, then
	// those left alone, by name.
	Pods []rolloutpreview.Pod `json:"pods"`
}

// Preview computes the syncs that bring in.PodSet to its template and
// replicas with the controller's own planner (planSync), writing nothing.
// Each sync takes the pods of the one before to be done (a created pod
// available, a pod updated in place available again if it was), as the
// controller waits for them; a pod that is not available now stays so.
func Preview(in PreviewInput) RolloutPreview {
	ps := in.PodSet
	revision := RevisionWithCollisions(&ps.Spec.Template, ps.Status.CollisionCount)
	var active []*corev1.Pod
	terminating := 0
	for _, p := range in.Pods {
		switch {
		case p.DeletionTimestamp != nil:
			terminating++
		case p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed:
			active = append(active, p)
		}
	}
	pin := syncInput(ps, active, terminating, revision, InPlaceHash(&ps.Spec.Template), in.Now)
	out := RolloutPreview{Revision: revision, MaxSurge: pin.strategy.maxSurge, MaxUnavailable: pin.strategy.maxUnavailable,
		Partition: pin.strategy.partition}
	switch {
	case !pin.strategy.rolling:
		out.Held = "updateStrategy.type is OnDelete: only pods deleted by hand get the new template"
	case ps.Spec.Paused:
		out.Held = "spec.paused is true: only scaling goes on"
	case ps.Status.FailedRevision != "" && ps.Status.FailedRevision == revision:
		// The controller holds a failed rollout as it holds a paused one.
		pin.paused = true
		out.Held = fmt.Sprintf("the rollout of revision %s failed (status.failedRevision): no pod moves to it until the template changes; only scaling goes on", revision)
		if ps.Spec.UpdateStrategy.OnFailure == deckhandv1alpha1.RollbackRolloutFailurePolicy {
			out.Held += " (onFailure Rollback returns the pods to status.stableRevision, which this preview does not show)"
		}
	}
	acted := map[*corev1.Pod]bool{}
	for step := 1; step <= len(active)+pin.replicas+1; step++ {
		pl := planSync(pin)
		if pl.create == 0 && len(pl.delete) == 0 && len(pl.evict) == 0 && len(pl.inPlace) == 0 {
			break
		}
		out.Steps, out.Creates = step, append(out.Creates, pl.create)
		views := map[*corev1.Pod]*podView{}
		for i := range pin.pods {
			views[pin.pods[i].pod] = &pin.pods[i]
		}
		gone := map[*corev1.Pod]bool{}
		for _, p := range pl.inPlace {
			out.Pods = append(out.Pods, rolloutpreview.Pod{Name: p.Name, Action: rolloutpreview.UpdateInPlace, Step: step})
			// Done by the next sync, available again if it was.
			views[p].updated, views[p].updatedInPlace, views[p].inPlaceOK, views[p].updating = true, true, false, false
		}
		for _, p := range append(pl.delete, pl.evict...) {
			action := rolloutpreview.Recreate
			if views[p].updated || !pl.rolling {
				action = rolloutpreview.ScaleDown
			}
			if !strings.HasPrefix(p.Name, previewPodPrefix) {
				out.Pods = append(out.Pods, rolloutpreview.Pod{Name: p.Name, Action: action, Step: step})
			}
			gone[p] = true
		}
		for _, p := range append(append(pl.inPlace, pl.delete...), pl.evict...) {
			acted[p] = true
		}
		kept := pin.pods[:0]
		for _, v := range pin.pods {
			if !gone[v.pod] {
				kept = append(kept, v)
			}
		}
		pin.pods = kept
		for i := range pl.create {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s%d-%d", previewPodPrefix, step, i),
				CreationTimestamp: metav1.NewTime(in.Now.Add(time.Duration(step) * time.Second))}}
			pin.pods = append(pin.pods, podView{pod: pod, updated: true, available: true})
		}
	}
	names := make([]*corev1.Pod, 0, len(active))
	for _, p := range active {
		if !acted[p] {
			names = append(names, p)
		}
	}
	slices.SortFunc(names, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	old := 0
	for _, v := range pin.pods {
		if !v.updated {
			old++
		}
	}
	for _, p := range names {
		why := "on the template already"
		if p.Labels[deckhandv1alpha1.PodSetRevisionLabel] != revision {
			switch {
			case out.Held != "":
				why = out.Held
			case old <= pin.strategy.partition:
				why = fmt.Sprintf("kept on its template by updateStrategy.partition (%d)", pin.strategy.partition)
			default:
				why = "waiting: pods that are not available use up maxUnavailable"
			}
		}
		out.Pods = append(out.Pods, rolloutpreview.Pod{Name: p.Name, Action: rolloutpreview.None, Why: why})
	}
	return out
}

// previewPodPrefix names the pods a preview's syncs create, which do not
// exist.
const previewPodPrefix = "(new)"
