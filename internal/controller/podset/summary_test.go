package podset_test

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/test/health"
)

// TestSummaryThroughARollout follows a PodSet through the states that tools
// knowing nothing of PodSets read from its summary conditions: Ready
// (kstatus Current, Argo CD Healthy), a rollout that cannot finish because
// its new pods cannot be scheduled (Reconciling: InProgress, Progressing),
// and Ready again once the template is reverted.
func TestSummaryThroughARollout(t *testing.T) {
	ns := env.Namespace(t)
	ps := newPodSet(ns, "summary", 2)
	mustCreate(t, ps)
	health.Wait(t, env.Client, ps, 2*time.Minute, health.IsReady(podset.ReasonComplete))

	// maxUnavailable (25% of 2) is 0: the rollout first creates a surge pod,
	// which no node can take, so every old pod stays.
	unschedulable := []byte(`{"spec":{"template":{"spec":{"nodeSelector":{"apps.deckhand.dev/no-such-node":"true"}}}}}`)
	if err := env.Client.Patch(ctxT(t), ps, client.RawPatch("application/merge-patch+json", unschedulable)); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, ps, time.Minute, health.IsReconciling(podset.ReasonRolloutInProgress))

	revert := []byte(`{"spec":{"template":{"spec":{"nodeSelector":null}}}}`)
	if err := env.Client.Patch(ctxT(t), ps, client.RawPatch("application/merge-patch+json", revert)); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, ps, 2*time.Minute, health.IsReady(podset.ReasonComplete))
}

// TestSummaryStalledByQuota runs a PodSet into a ResourceQuota that refuses
// every pod: Ready is False with ReplicaFailure and Stalled is set (kstatus
// Failed, Argo CD Degraded) until the quota is gone.
func TestSummaryStalledByQuota(t *testing.T) {
	ns := env.Namespace(t)
	quota := health.RefusePods(ns)
	mustCreate(t, quota)
	ps := newPodSet(ns, "refused", 2)
	mustCreate(t, ps)
	health.Wait(t, env.Client, ps, time.Minute, health.IsStalled(podset.ReasonReplicaFailure))

	if err := env.Client.Delete(ctxT(t), quota); err != nil {
		t.Fatal(err)
	}
	health.Wait(t, env.Client, ps, 2*time.Minute, health.IsReady(podset.ReasonComplete))
}
