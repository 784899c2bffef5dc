package restartschedule

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/deckhand-dev/deckhand/internal/rollout"
)

// A restart's rollout has not started while the cache still holds the
// workload from before the restart patch, however rolled out it looks.
func TestRolloutStatusWaitsForTheRestart(t *testing.T) {
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
		Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3},
	}
	cases := map[string]struct {
		minGen int64
		want   rollout.State
		msg    string
	}{
		"cache older than the patch": {3, rollout.InProgress, "reach the cache"},
		"cache has the patch":        {2, rolloutComplete, "rolled out"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, msg := rolloutStatus(dep, tc.minGen)
			if got != tc.want || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %d %q, want %d with %q", got, msg, tc.want, tc.msg)
			}
		})
	}
}

func TestSkipReason(t *testing.T) {
	if r := skipReason(&appsv1.Deployment{Spec: appsv1.DeploymentSpec{Paused: true}}); !strings.Contains(r, "paused") {
		t.Fatalf("paused Deployment: %q", r)
	}
	if r := skipReason(&appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}}}); !strings.Contains(r, "OnDelete") {
		t.Fatalf("OnDelete StatefulSet: %q", r)
	}
	if r := skipReason(&appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}); !strings.Contains(r, "OnDelete") {
		t.Fatalf("OnDelete DaemonSet: %q", r)
	}
	if r := skipReason(&appsv1.Deployment{}); r != "" {
		t.Fatalf("running Deployment skipped: %q", r)
	}
}
