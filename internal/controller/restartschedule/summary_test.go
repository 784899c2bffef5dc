package restartschedule

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/test/health"
)

// TestUnitSummary checks the summary conditions of the RestartSchedules the
// webhook keeps away from the API server or that take a failed run, and
// what tools make of them: a schedule that never fires is stalled (kstatus
// Failed, Argo CD Degraded) until its spec changes; a failed run leaves it
// not Ready but not stalled, since the next run may succeed (kstatus
// InProgress, Argo CD Degraded as for a CronJob whose last Job failed).
func TestUnitSummary(t *testing.T) {
	h := newHarness(t, "2026-01-01T11:00:01Z", schedule("never", "0 0 31 2 *", "2026-01-01T10:30:00Z"), deployment("web", nil))
	h.reconcile("never")
	observe(t, h.rs("never"), health.IsStalled(ReasonInvalidSchedule))

	h = newHarness(t, "2026-01-01T11:00:01Z", schedule("s", "0 * * * *", "2026-01-01T10:30:00Z"), deployment("web", nil))
	h.reconcile("s")
	d := h.deploy("web")
	d.Status.ObservedGeneration = d.Generation
	d.Status.UpdatedReplicas = 1
	d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "timed out"}}
	if err := h.c.Status().Update(t.Context(), d); err != nil {
		t.Fatal(err)
	}
	h.set("2026-01-01T11:01:00Z")
	h.reconcile("s")
	observe(t, h.rs("s"), health.Want{Ready: metav1.ConditionFalse, Reason: ReasonRestartFailed, Kstatus: status.InProgressStatus, ArgoCD: health.Degraded})
}

func observe(t *testing.T, rs *deckhandv1alpha1.RestartSchedule, want health.Want) {
	t.Helper()
	got, err := health.Observe(rs)
	if err != nil {
		t.Fatal(err)
	}
	if got.Want != want {
		t.Errorf("RestartSchedule %s: %s; want %+v", rs.Name, got, want)
	}
}
