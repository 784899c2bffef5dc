package restartschedule

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/event"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// A pod maps to the workload a schedule names it by, the key the
// candidates' index holds.
func TestPodWorkload(t *testing.T) {
	owned := func(kind, name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels, OwnerReferences: []metav1.OwnerReference{
			{Kind: kind, Name: name, Controller: ptr.To(true)}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"Deployment", owned("ReplicaSet", "web-7d9f8c", map[string]string{"pod-template-hash": "7d9f8c"}), "Deployment/web"},
		{"ReplicaSet of no Deployment", owned("ReplicaSet", "web", map[string]string{"pod-template-hash": "7d9f8c"}), ""},
		{"ReplicaSet without the hash label", owned("ReplicaSet", "web-7d9f8c", nil), ""},
		{"StatefulSet", owned("StatefulSet", "db", nil), "StatefulSet/db"},
		{"DaemonSet", owned("DaemonSet", "agent", nil), "DaemonSet/agent"},
		{"PodSet", owned("PodSet", "api", nil), "PodSet/api"},
		{"Job", owned("Job", "batch", nil), ""},
		{"no controller", &corev1.Pod{}, ""},
	} {
		if got := podWorkload(tc.pod); got != tc.want {
			t.Errorf("%s: podWorkload = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The index names the workloads whose candidates wait for a turn, once
// each, and not those held for another reason.
func TestAwaitingTurnIndex(t *testing.T) {
	rs := &deckhandv1alpha1.RestartSchedule{Status: deckhandv1alpha1.RestartScheduleStatus{Candidates: []deckhandv1alpha1.RestartCandidate{
		{Pod: "web-1", Workload: "Deployment/web", HeldBy: "maxConcurrent 1: after the eviction of web-0"},
		{Pod: "web-2", Workload: "Deployment/web", HeldBy: "maxConcurrent 1: 1 pod(s) of Deployment/web unavailable"},
		{Pod: "db-0", Workload: "StatefulSet/db", HeldBy: "minPodAge 10m0s: the pod is 1m0s old"},
		{Pod: "api-x", Workload: "PodSet/api", HeldBy: "evicted"},
	}}}
	if got, want := awaitingTurn(rs), []string{"Deployment/web"}; !slices.Equal(got, want) {
		t.Fatalf("awaitingTurn = %v, want %v", got, want)
	}
	// The HeldBy the planner writes is what the index reads.
	in := needInput{action: deckhandv1alpha1.RestartAction{MaxConcurrent: 1, MinPodAge: &metav1.Duration{}},
		triggers: []deckhandv1alpha1.RestartNeedTrigger{{PodAge: &deckhandv1alpha1.RestartPodAgeTrigger{MaxAge: metav1.Duration{Duration: 1}}}}}
	in.now = metav1.Now().Time
	w := needWorkload{key: "Deployment/web", desired: 2}
	for _, name := range []string{"web-1", "web-2"} {
		w.pods = append(w.pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(in.now.Add(-1e9))},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}})
	}
	in.workloads = []needWorkload{w}
	plan := planNeed(in)
	rs.Status.Candidates = nil
	for _, c := range plan.candidates {
		rs.Status.Candidates = append(rs.Status.Candidates, c.RestartCandidate)
	}
	if got, want := awaitingTurn(rs), []string{"Deployment/web"}; !slices.Equal(got, want) {
		t.Fatalf("awaitingTurn of the planner's candidates %+v = %v, want %v", rs.Status.Candidates, got, want)
	}
}

// Only a change of readiness wakes a schedule.
func TestReadinessChanged(t *testing.T) {
	pod := func(ready corev1.ConditionStatus, rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}}
	}
	for _, tc := range []struct {
		name     string
		old, new *corev1.Pod
		want     bool
	}{
		{"became Ready", pod(corev1.ConditionFalse, "1"), pod(corev1.ConditionTrue, "2"), true},
		{"stopped being Ready", pod(corev1.ConditionTrue, "1"), pod(corev1.ConditionFalse, "2"), true},
		{"still Ready", pod(corev1.ConditionTrue, "1"), pod(corev1.ConditionTrue, "2"), false},
	} {
		if got := readinessChanged.Update(event.TypedUpdateEvent[*corev1.Pod]{ObjectOld: tc.old, ObjectNew: tc.new}); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if readinessChanged.Create(event.TypedCreateEvent[*corev1.Pod]{Object: pod(corev1.ConditionTrue, "1")}) {
		t.Error("a created pod wakes schedules")
	}
}
