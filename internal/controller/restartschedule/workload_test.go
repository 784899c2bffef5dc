package restartschedule

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
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

// A selector target takes the matching workloads of every target kind in
// the schedule's namespace, by kind then name.
func TestListTargetsBySelector(t *testing.T) {
	meta := func(name, tier string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Namespace: unitNS, Name: name, Labels: map[string]string{"tier": tier}}
	}
	c := fake.NewClientBuilder().WithScheme(unitScheme()).WithObjects(
		&appsv1.Deployment{ObjectMeta: meta("web", "front")},
		&appsv1.Deployment{ObjectMeta: meta("api", "front")},
		&appsv1.Deployment{ObjectMeta: meta("db-proxy", "back")},
		&appsv1.StatefulSet{ObjectMeta: meta("cache", "front")},
		&appsv1.DaemonSet{ObjectMeta: meta("agent", "front")},
		&deckhandv1alpha1.PodSet{ObjectMeta: meta("workers", "front")},
	).Build()
	rs := &deckhandv1alpha1.RestartSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: unitNS, Name: "s"},
		Spec: deckhandv1alpha1.RestartScheduleSpec{Target: deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "front"}}}}}
	refs, err := listTargets(context.Background(), c, rs)
	if err != nil {
		t.Fatal(err)
	}
	want := "[{DaemonSet agent} {Deployment api} {Deployment web} {PodSet workers} {StatefulSet cache}]"
	if got := fmt.Sprint(refs); got != want {
		t.Fatalf("listTargets = %s, want %s", got, want)
	}
}
