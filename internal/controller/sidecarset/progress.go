package sidecarset

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/rolloutfailure"
)

// defaultProgressDeadline applies when
// spec.updateStrategy.progressDeadlineSeconds is unset (the CRD defaults
// it; objects stored before the field existed lack it), as for a
// Deployment.
const defaultProgressDeadline = 600 * time.Second

func progressDeadline(s *deckhandv1alpha1.SidecarSet) time.Duration {
	if d := s.Spec.UpdateStrategy.ProgressDeadlineSeconds; d != nil && *d > 0 {
		return time.Duration(*d) * time.Second
	}
	return defaultProgressDeadline
}

// rolloutFailed reports whether the status of s, as persisted, says the
// rollout of revision failed; the rollout then updates no further pod.
func rolloutFailed(s *deckhandv1alpha1.SidecarSet, revision string) bool {
	return s.Status.FailedRevision != "" && s.Status.FailedRevision == revision
}

// trackRollout sets st's lastProgressTime, stableRevision and
// failedRevision from prev, the status as read, and what this reconcile
// counted. Progress is another pod updated with its sidecars ready (or a
// new revision, or the start of a rollout; a pod moved to the latest
// revision counts too, see progressed); a rollout under way
// (inProgress) without progress for deadline has failed. It returns how
// long until the deadline passes, 0 if it cannot. It is pure: time comes
// in as now.
func trackRollout(prev, st *deckhandv1alpha1.SidecarSetStatus, inProgress bool, deadline time.Duration, now time.Time) time.Duration {
	st.StableRevision, st.FailedRevision = prev.StableRevision, prev.FailedRevision
	timedOut, left := false, time.Duration(0)
	if inProgress {
		st.LastProgressTime = prev.LastProgressTime
		if prev.LastProgressTime == nil || prev.LatestRevision != st.LatestRevision || st.UpdatedPods > prev.UpdatedPods {
			t := metav1.NewTime(now)
			st.LastProgressTime = &t
		}
		left = st.LastProgressTime.Add(deadline).Sub(now)
		timedOut = left <= 0
	}
	rolloutfailure.Revisions{Stable: &st.StableRevision, Failed: &st.FailedRevision}.
		Settle(st.LatestRevision, st.UpdatedPods == st.MatchedPods, timedOut)
	return max(left, 0)
}

// progressed records that the rollout has just moved another pod to the
// latest revision: progress, as a Deployment counts a new pod, so that the
// deadline runs from the last pod the rollout moved, not from the first.
func (sc *scope) progressed() {
	if sc.status.LastProgressTime != nil {
		t := metav1.NewTime(sc.now)
		sc.status.LastProgressTime = &t
	}
}

// failureOutcome is the reason and message of the failed rollout of
// st.LatestRevision as updateStrategy.onFailure handles it: held
// (RolloutPaused), or returning the pods to the stable revision
// (RollingBack, then RolledBack once every matched pod is there and ready).
func (r *Reconciler) failureOutcome(sc *scope, st *deckhandv1alpha1.SidecarSetStatus, deadline time.Duration) (string, string) {
	s := sc.set
	failed := fmt.Sprintf("the rollout of revision %s made no progress for %ds (%d of %d pod(s) updated)",
		st.LatestRevision, int64(deadline/time.Second), st.UpdatedPods, st.MatchedPods)
	if s.Spec.UpdateStrategy.OnFailure != deckhandv1alpha1.RollbackRolloutFailurePolicy {
		return ReasonRolloutPaused, failed + "; updateStrategy.onFailure is Pause, so no further pod is updated until the revision changes"
	}
	if _, _, ok := r.Lister.RevisionForm(s, st.StableRevision); !ok {
		return ReasonRolloutPaused, failed + fmt.Sprintf("; the stable revision %s is not kept, so the rollout is held instead of rolled back", st.StableRevision)
	}
	back := int32(0)
	for _, p := range sc.pods {
		if hash, _ := p.record.Revisions(s.Name); p.injected() && p.ready && hash == st.StableRevision {
			back++
		}
	}
	reason := ReasonRollingBack
	if back == st.MatchedPods {
		reason = ReasonRolledBack
	}
	return reason, failed + fmt.Sprintf("; updateStrategy.onFailure is Rollback: %d of %d pod(s) ready on stable revision %s; the spec differs until it changes",
		back, st.MatchedPods, st.StableRevision)
}
