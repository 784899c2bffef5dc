package podset_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	"github.com/deckhand-dev/deckhand/test/health"
)

// TestQuotaFailureConditionsAndEvents runs a PodSet into a ResourceQuota
// that refuses its pods, twice: while scaling up, then while a recreating
// rollout needs a surge pod. Each time the status carries ReplicaFailure
// (FailedCreate, with the API server's quota error), Progressing says what
// the PodSet is trying to do, and a Warning FailedCreate Event is recorded;
// once the quota allows the pods, the PodSet gets there and ReplicaFailure
// is removed.
func TestQuotaFailureConditionsAndEvents(t *testing.T) {
	ns := env.Namespace(t)
	quota := health.LimitPods(t, env.Client, ns, 1)

	ps := newPodSet(ns, "quota", 3)
	mustCreate(t, ps)

	// Scaling up: one pod fits, the others are refused.
	cur := waitPodSetConditions(t, ps, "the quota failure is reported while scaling", func(st *deckhandv1alpha1.PodSetStatus) bool {
		return st.Replicas == 1 && hasCondition(st, deckhandv1alpha1.PodSetReplicaFailureCondition, podset.ReasonFailedCreate) &&
			hasCondition(st, deckhandv1alpha1.PodSetProgressingCondition, podset.ReasonScaling)
	})
	failure := meta.FindStatusCondition(cur.Status.Conditions, deckhandv1alpha1.PodSetReplicaFailureCondition)
	if failure.Status != metav1.ConditionTrue || !strings.Contains(failure.Message, "exceeded quota") || !strings.Contains(failure.Message, quota.Name) {
		t.Errorf("ReplicaFailure = %+v, want True with the quota error", failure)
	}
	waitEvent(t, ps, corev1.EventTypeWarning, podset.ReasonFailedCreate, "exceeded quota: "+quota.Name)

	// Room for every replica: the PodSet gets there and the failure goes.
	setQuotaPods(t, quota, "3")
	cur = waitConverged(t, ps, 3, 2*time.Minute)
	cur = waitPodSetConditions(t, cur, "ReplicaFailure removed, progress complete", func(st *deckhandv1alpha1.PodSetStatus) bool {
		return meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.PodSetReplicaFailureCondition) == nil &&
			hasCondition(st, deckhandv1alpha1.PodSetProgressingCondition, podset.ReasonComplete)
	})
	oldRevision := cur.Status.UpdateRevision

	// A non-image change recreates pods. maxUnavailable 25% of 3 is 0, so
	// the rollout must first create a surge pod, which the quota refuses:
	// the rollout stalls with every old pod still running.
	mergePatch(t, cur, `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"`+pauseImage+`","env":[{"name":"MODE","value":"strict"}]}]}}}}`)
	cur = waitPodSetConditions(t, cur, "the quota failure is reported during the rollout", func(st *deckhandv1alpha1.PodSetStatus) bool {
		return st.UpdateRevision != oldRevision && st.UpdatedReplicas == 0 &&
			hasCondition(st, deckhandv1alpha1.PodSetReplicaFailureCondition, podset.ReasonFailedCreate) &&
			hasCondition(st, deckhandv1alpha1.PodSetProgressingCondition, podset.ReasonUpdating)
	})
	if cur.Status.AvailableReplicas != 3 {
		t.Errorf("availableReplicas = %d while the rollout is stalled, want 3", cur.Status.AvailableReplicas)
	}
	if c := meta.FindStatusCondition(cur.Status.Conditions, deckhandv1alpha1.PodSetReplicaFailureCondition); !strings.Contains(c.Message, "exceeded quota") {
		t.Errorf("ReplicaFailure message %q does not carry the quota error", c.Message)
	}

	// Without the quota the rollout completes and the failure goes.
	if err := env.Client.Delete(ctxT(t), quota); err != nil {
		t.Fatal(err)
	}
	cur = waitRolledOut(t, cur, 3)
	waitPodSetConditions(t, cur, "ReplicaFailure removed after the rollout", func(st *deckhandv1alpha1.PodSetStatus) bool {
		return meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.PodSetReplicaFailureCondition) == nil &&
			hasCondition(st, deckhandv1alpha1.PodSetProgressingCondition, podset.ReasonComplete) &&
			st.CurrentRevision == st.UpdateRevision
	})
}

// TestSummaryStalledByQuota runs a PodSet into a ResourceQuota that refuses
// every pod: Ready is False with ReplicaFailure and Stalled is set (kstatus
// Failed, Argo CD Degraded) until the quota is gone.
func TestSummaryStalledByQuota(t *testing.T) {
	ns := env.Namespace(t)
	quota := health.RefusePods(t, env.Client, ns)
	ps := newPodSet(ns, "refused", 2)
	mustCreate(t, ps)
	health.Wait(t, env.Client, ps, time.Minute, health.IsStalled(podset.ReasonReplicaFailure))

	if err := env.Client.Delete(ctxT(t), quota); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, ps, 2*time.Minute, health.IsReady(podset.ReasonComplete))
}

func hasCondition(st *deckhandv1alpha1.PodSetStatus, typ, reason string) bool {
	c := meta.FindStatusCondition(st.Conditions, typ)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == reason
}

// waitQuotaEnforced waits until kube-controller-manager has computed the
// quota's status: until then the API server refuses every pod of the
// namespace, not only those beyond the limit.
func waitQuotaEnforced(t *testing.T, quota *corev1.ResourceQuota, pods string) {
	t.Helper()
	want := resource.MustParse(pods)
	waitFor(t, quota, time.Minute, "the quota's status is computed", func(got *corev1.ResourceQuota) (bool, string) {
		hard, ok := got.Status.Hard[corev1.ResourcePods]
		return ok && hard.Cmp(want) == 0, "status.hard.pods " + hard.String()
	})
}

func setQuotaPods(t *testing.T, quota *corev1.ResourceQuota, pods string) {
	t.Helper()
	mergePatch(t, quota, `{"spec":{"hard":{"pods":"`+pods+`"}}}`)
	waitQuotaEnforced(t, quota, pods)
}

// failingRollout creates a PodSet of n pods whose rollouts may update one
// pod at a time (maxUnavailable 1, maxSurge 0) and fail after 3s without
// progress, with onFailure as given; waits until it is available and its
// revision stable, then changes its image to one that cannot be pulled. It
// returns the PodSet and the stable revision.
func failingRollout(t *testing.T, name string, n int32, onFailure deckhandv1alpha1.RolloutFailurePolicy) (*deckhandv1alpha1.PodSet, string) {
	t.Helper()
	ps := createPodSet(t, name, n, func(ps *deckhandv1alpha1.PodSet) {
		ps.Spec.UpdateStrategy.MaxUnavailable = ptr.To(intstr.FromInt32(1))
		ps.Spec.UpdateStrategy.MaxSurge = ptr.To(intstr.FromInt32(0))
		ps.Spec.UpdateStrategy.OnFailure = onFailure
		ps.Spec.ProgressDeadlineSeconds = ptr.To[int32](3)
	})
	cur := waitConverged(t, ps, n, 2*time.Minute)
	cur = waitPodSetConditions(t, cur, "the revision is recorded as stable", func(st *deckhandv1alpha1.PodSetStatus) bool {
		return st.StableRevision != "" && st.StableRevision == st.UpdateRevision
	})
	stable := cur.Status.StableRevision
	mergePatch(t, cur, `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"`+localcluster.UnpullableImage("app:2")+`"}]}}}}`)
	return cur, stable
}

// rolloutFailed reports whether st says the rollout of its update
// revision failed, handled as reason says.
func rolloutFailed(st *deckhandv1alpha1.PodSetStatus, reason string) bool {
	progressing := meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.PodSetProgressingCondition)
	return st.FailedRevision != "" && st.FailedRevision == st.UpdateRevision &&
		hasCondition(st, deckhandv1alpha1.RolloutFailedCondition, reason) &&
		progressing != nil && progressing.Status == metav1.ConditionFalse && progressing.Reason == podset.ReasonProgressDeadlineExceeded
}

// TestFailedRolloutPauses rolls an image that cannot be pulled out to a
// PodSet with onFailure Pause: the one pod maxUnavailable lets it update
// never becomes ready, so after the progress deadline the rollout has
// failed (RolloutFailed RolloutPaused, Progressing False
// ProgressDeadlineExceeded, one Warning RolloutFailed Event). Raising
// maxUnavailable then updates no further pod: the failure holds the
// rollout, though spec.paused is not set.
func TestFailedRolloutPauses(t *testing.T) {
	ps, _ := failingRollout(t, "pause", 4, deckhandv1alpha1.PauseRolloutFailurePolicy)
	cur := waitPodSetConditions(t, ps, "the rollout fails and pauses", func(st *deckhandv1alpha1.PodSetStatus) bool {
		return rolloutFailed(st, podset.ReasonRolloutPaused) && st.UpdatedReplicas == 1
	})
	waitEvent(t, ps, corev1.EventTypeWarning, podset.ReasonRolloutFailed, "paused: no further pod is updated")

	mergePatch(t, cur, `{"spec":{"updateStrategy":{"maxUnavailable":2}}}`)
	waitPodSetConditions(t, cur, "the failed rollout stays paused with more room", func(st *deckhandv1alpha1.PodSetStatus) bool {
		return rolloutFailed(st, podset.ReasonRolloutPaused)
	})
	// Several times what an in-place update takes here (a second or two).
	testutil.Consistently(t, 10*time.Second, func(ctx context.Context) error {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(ps), cur)
		if st := cur.Status; err == nil && (cur.Spec.Paused || st.UpdatedReplicas != 1 || st.AvailableReplicas != 3) {
			err = fmt.Errorf("paused=%v updated=%d available=%d, want paused=false, 1 pod updated and 3 available",
				cur.Spec.Paused, st.UpdatedReplicas, st.AvailableReplicas)
		}
		return err
	}, "no further pod is updated")
}

// TestFailedRolloutRollsBack rolls an image that cannot be pulled out to a
// PodSet with onFailure Rollback: after the progress deadline the pod it
// updated returns to the stable revision and is ready again, while
// spec.template keeps the new image (RolloutFailed RolledBack, one Warning
// RolloutFailed Event). A manager started afresh (no memory of the
// failure) keeps the pods there, as the failure is read from the status;
// a new template then rolls out and ends the failure.
func TestFailedRolloutRollsBack(t *testing.T) {
	ps, stable := failingRollout(t, "rollback", 3, deckhandv1alpha1.RollbackRolloutFailurePolicy)
	backOnStable := func(what string) *deckhandv1alpha1.PodSet {
		return waitPodSet(t, ps, 2*time.Minute, what, func(cur *deckhandv1alpha1.PodSet, pods []corev1.Pod) (bool, string) {
			back := 0
			for i := range pods {
				p := &pods[i]
				if p.DeletionTimestamp == nil && podutil.IsPodReady(p) && runningSpecImages(p) && p.Spec.Containers[0].Image == pauseImage &&
					p.Labels[deckhandv1alpha1.PodSetRevisionLabel] == stable {
					back++
				}
			}
			st := &cur.Status
			return len(pods) == 3 && back == 3 && st.ObservedGeneration == cur.Generation && st.UpdatedReplicas == 0 &&
					rolloutFailed(st, podset.ReasonRolledBack),
				fmt.Sprintf("pods %d, ready on stable revision %s %d, status %+v", len(pods), stable, back, st)
		})
	}
	cur := backOnStable("the failed pod returns to the stable revision")
	if img := cur.Spec.Template.Spec.Containers[0].Image; img == pauseImage {
		t.Errorf("spec.template image = %s: the controller rewrote the template", img)
	}
	waitEvent(t, ps, corev1.EventTypeWarning, podset.ReasonRolloutFailed, "rolling the pods back to stable revision "+stable)

	restartManager(t)
	mergePatch(t, cur, `{"spec":{"minReadySeconds":1}}`)
	backOnStable("a new manager keeps the pods on the stable revision")

	// The new rollout gets a deadline it can meet on a loaded machine.
	mergePatch(t, cur, `{"spec":{"progressDeadlineSeconds":120,"template":{"spec":{"containers":[{"name":"main","image":"registry.k8s.io/pause:3.9"}]}}}}`)
	cur = waitRolledOut(t, cur, 3)
	waitPodSetConditions(t, cur, "the new template ends the failure", func(st *deckhandv1alpha1.PodSetStatus) bool {
		return st.FailedRevision == "" && st.StableRevision == st.UpdateRevision &&
			meta.FindStatusCondition(st.Conditions, deckhandv1alpha1.RolloutFailedCondition) == nil
	})
}
