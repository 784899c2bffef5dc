package podset

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/rolloutfailure"
)

// Reasons of a failed rollout (rolloutfailure): the Warning Event recorded
// once when it fails, and the RolloutFailed condition that stays until the
// template changes. RolledBack is ReasonRolledBack, as for the rollback-to
// annotation.
const (
	ReasonRolloutFailed = rolloutfailure.ReasonRolloutFailed
	ReasonRolloutPaused = rolloutfailure.ReasonRolloutPaused
	ReasonRollingBack   = rolloutfailure.ReasonRollingBack
)

// failureResponse is what syncs do while the rollout of the current
// revision has failed.
type failureResponse struct {
	// rollbackTo is the stable revision the pods return to (onFailure
	// Rollback); nil means the rollout is held where it is.
	rollbackTo *revisionInfo
	// held says why a Rollback is held instead, if it is.
	held string
}

// respondToFailure decides, from the persisted status alone (failed and
// stable revisions) and the PodSet's ControllerRevisions, what a sync does
// about a failed rollout of revision; nil when the rollout has not failed.
func respondToFailure(ps *deckhandv1alpha1.PodSet, failed, stable, revision string, revs []*appsv1.ControllerRevision) *failureResponse {
	if failed == "" || failed != revision {
		return nil
	}
	if ps.Spec.UpdateStrategy.OnFailure != deckhandv1alpha1.RollbackRolloutFailurePolicy {
		return &failureResponse{}
	}
	for _, cr := range revs {
		if info := infoOf(cr); info.hash == stable && info.template != nil {
			return &failureResponse{rollbackTo: &info}
		}
	}
	return &failureResponse{held: fmt.Sprintf("the template of stable revision %s is not kept", stable)}
}

// towards returns a copy of s whose template and revision are rev's, for
// the pod writes of a rollback; spec.template itself is not the
// controller's to change.
func (s *scope) towards(rev *revisionInfo) *scope {
	w := *s
	w.ps = s.ps.DeepCopy()
	w.ps.Spec.Template = *rev.template.DeepCopy()
	w.revision = rev.hash
	w.inPlace = InPlaceHash(rev.template)
	return &w
}

// rolloutFailedCondition is the RolloutFailed condition of a failed rollout
// of s.revision, as resp handles it.
func rolloutFailedCondition(s *scope, resp *failureResponse, replicas int32, deadline time.Duration, now time.Time) metav1.Condition {
	c := rolloutfailure.Condition("", "", s.ps.Generation, metav1.NewTime(now))
	failed := fmt.Sprintf("rollout of revision %s made no progress for %ds", s.revision, int64(deadline/time.Second))
	if resp.rollbackTo == nil {
		c.Reason = ReasonRolloutPaused
		c.Message = failed + "; no further pod is updated until the template changes"
		if resp.held != "" {
			c.Message += " (" + resp.held + ")"
		}
		return c
	}
	back := 0
	for _, p := range s.pods {
		avail, _ := isPodAvailable(p, s.ps.Spec.MinReadySeconds, now)
		if avail && p.Labels[deckhandv1alpha1.PodSetRevisionLabel] == resp.rollbackTo.hash {
			back++
		}
	}
	c.Reason = ReasonRollingBack
	if back == int(replicas) && len(s.pods) == back {
		c.Reason = ReasonRolledBack
	}
	c.Message = fmt.Sprintf("%s; %d of %d pods available on stable revision %s (revision %d); spec.template differs until it is changed",
		failed, back, replicas, resp.rollbackTo.hash, resp.rollbackTo.number)
	return c
}

// failureNote is the note of the Warning Event recorded when the rollout
// of revision fails.
func failureNote(ps *deckhandv1alpha1.PodSet, revision string, resp *failureResponse) string {
	what := fmt.Sprintf("Rollout of revision %s made no progress for %ds", revision, int64(progressDeadline(ps)/time.Second))
	switch {
	case resp.rollbackTo != nil:
		return fmt.Sprintf("%s; rolling the pods back to stable revision %s (revision %d)", what, resp.rollbackTo.hash, resp.rollbackTo.number)
	case resp.held != "":
		return fmt.Sprintf("%s; paused, not rolled back: %s", what, resp.held)
	default:
		return what + "; paused: no further pod is updated"
	}
}
