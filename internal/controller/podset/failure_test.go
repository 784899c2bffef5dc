package podset_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/podset"
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
