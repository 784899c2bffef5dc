package restartschedule_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
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

	if err := env.Client.Get(ctx(t), types.NamespacedName{Namespace: ns, Name: rs.Name}, rs); err != nil {
		t.Fatal(err)
	}
	rs.Spec.Suspend = true
	if err := env.Client.Update(ctx(t), rs); err != nil {
		t.Fatal(err)
	}
	suspended := health.Want{Ready: metav1.ConditionTrue, Reason: restartschedule.ReasonScheduled, Kstatus: status.CurrentStatus, ArgoCD: health.Suspended}
	health.Wait(t, env.Client, rs, 30*time.Second, suspended)
}
