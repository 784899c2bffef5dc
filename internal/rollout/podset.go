package rollout

import (
	"fmt"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// podSetStatus judges a PodSet like a Deployment: its controller has
// observed the latest spec, every desired pod runs the current template
// (updatedReplicas), no old-template pod is left, and the updated pods are
// ready and available. A Progressing condition whose reason is
// ProgressDeadlineExceeded means the rollout failed.
func podSetStatus(ps *deckhandv1alpha1.PodSet) (State, string) {
	s := ps.Status
	if s.ObservedGeneration < ps.Generation {
		return InProgress, "waiting for the PodSet spec update to be observed"
	}
	for _, c := range s.Conditions {
		if c.Type == deckhandv1alpha1.PodSetProgressingCondition && c.Reason == progressDeadlineExceeded {
			return Failed, fmt.Sprintf("PodSet exceeded its progress deadline: %s", c.Message)
		}
	}
	want := replicas(ps.Spec.Replicas)
	switch {
	case s.UpdatedReplicas < want:
		return InProgress, fmt.Sprintf("%d of %d new replicas have been updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return InProgress, fmt.Sprintf("%d old replicas are pending termination", s.Replicas-s.UpdatedReplicas)
	case s.ReadyReplicas < want:
		return InProgress, fmt.Sprintf("%d of %d replicas are ready", s.ReadyReplicas, want)
	case s.AvailableReplicas < want:
		return InProgress, fmt.Sprintf("%d of %d updated replicas are available", s.AvailableReplicas, want)
	}
	return Complete, fmt.Sprintf("PodSet rolled out: %d replicas updated and available", s.UpdatedReplicas)
}
