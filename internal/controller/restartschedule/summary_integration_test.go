package restartschedule_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	"github.com/deckhand-dev/deckhand/test/health"
)

// TestIntegrationSummary checks what tools make of a RestartSchedule on the real API
// server: Ready while it waits for its next run (kstatus Current, Argo CD
// Healthy), and Suspended for Argo CD, as a suspended CronJob, while
// spec.suspend is set.
func TestIntegrationSummary(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	rs := &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "30 2 * * *", MaxConcurrent: 1, HistoryLimit: 3,
			Target: targetRef("web")},
	}
	create(t, rs)
	health.Wait(t, env.Client, rs, 30*time.Second, health.IsReady(restartschedule.ReasonScheduled))

	testutil.Get(ctx(t), t, env.Client, types.NamespacedName{Namespace: ns, Name: rs.Name}, rs)
	rs.Spec.Suspend = true
	if err := env.Client.Update(ctx(t), rs); err != nil {
		t.Fatal(err)
	}
	suspended := health.Want{Ready: metav1.ConditionTrue, Reason: restartschedule.ReasonScheduled, Kstatus: status.CurrentStatus, ArgoCD: health.Suspended}
	health.Wait(t, env.Client, rs, 30*time.Second, suspended)
}

// TestIntegrationFailedRunSummary: a run whose rollout cannot finish (a
// quota refuses the new pods, so the Deployment passes its progress
// deadline) leaves the RestartSchedule not Ready with RestartFailed, and
// not stalled, since the next run may succeed: kstatus InProgress, Argo CD
// Degraded, as for a CronJob whose last Job failed.
func TestIntegrationFailedRunSummary(t *testing.T) {
	needEnv(t)
	ns := env.Namespace(t)
	d := newDeployment(ns, "web", 1, nil, nil)
	d.Spec.ProgressDeadlineSeconds = ptr.To[int32](1)
	create(t, d)
	waitRolledOut(t, ns, "web")
	health.RefusePods(t, env.Client, ns)

	rs := &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Schedule: "@every 5s", MaxConcurrent: 1, HistoryLimit: 10,
			Target: targetRef("web")},
	}
	create(t, rs)
	waitHistory(t, ns, rs.Name, "a Failed restart of Deployment/web", func(h deckhandv1alpha1.RestartRecord) bool {
		return h.Result == deckhandv1alpha1.RestartFailed && h.Workload == "Deployment/web"
	})
	health.Wait(t, env.Client, rs, 30*time.Second, health.Want{Ready: metav1.ConditionFalse,
		Reason: restartschedule.ReasonRestartFailed, Kstatus: status.InProgressStatus, ArgoCD: health.Degraded})
}
