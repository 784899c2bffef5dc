package podutil

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func podWith(phase corev1.PodPhase, conds ...corev1.PodCondition) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, Conditions: conds}}
}

func readyCond(s corev1.ConditionStatus, at time.Time) corev1.PodCondition {
	return corev1.PodCondition{Type: corev1.PodReady, Status: s, LastTransitionTime: metav1.NewTime(at)}
}

func TestIsPodReady(t *testing.T) {
	at := time.Unix(1000, 0)
	cases := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"no conditions":         {podWith(corev1.PodRunning), false},
		"ready true":            {podWith(corev1.PodRunning, readyCond(corev1.ConditionTrue, at)), true},
		"ready false":           {podWith(corev1.PodRunning, readyCond(corev1.ConditionFalse, at)), false},
		"ready unknown":         {podWith(corev1.PodRunning, readyCond(corev1.ConditionUnknown, at)), false},
		"only containers ready": {podWith(corev1.PodRunning, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}), false},
		"ready among others": {podWith(corev1.PodRunning,
			corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, readyCond(corev1.ConditionTrue, at)), true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IsPodReady(tc.pod); got != tc.want {
				t.Fatalf("IsPodReady = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsPodActive(t *testing.T) {
	deleting := podWith(corev1.PodRunning)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1000, 0)}
	cases := map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"pending":   {podWith(corev1.PodPending), true},
		"running":   {podWith(corev1.PodRunning), true},
		"unknown":   {podWith(corev1.PodUnknown), true},
		"no phase":  {podWith(""), true},
		"succeeded": {podWith(corev1.PodSucceeded), false},
		"failed":    {podWith(corev1.PodFailed), false},
		"deleting":  {deleting, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IsPodActive(tc.pod); got != tc.want {
				t.Fatalf("IsPodActive = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodReadyTime(t *testing.T) {
	at := time.Unix(1000, 0)
	cases := map[string]struct {
		pod  *corev1.Pod
		want time.Time
	}{
		"ready":         {podWith(corev1.PodRunning, readyCond(corev1.ConditionTrue, at)), at},
		"not ready":     {podWith(corev1.PodRunning, readyCond(corev1.ConditionFalse, at)), time.Time{}},
		"no conditions": {podWith(corev1.PodPending), time.Time{}},
		"other condition's time is ignored": {podWith(corev1.PodRunning,
			corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at.Add(time.Hour))},
			readyCond(corev1.ConditionTrue, at)), at},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := PodReadyTime(tc.pod); !got.Time.Equal(tc.want) {
				t.Fatalf("PodReadyTime = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsNativeSidecar(t *testing.T) {
	cases := map[string]struct {
		policy *corev1.ContainerRestartPolicy
		want   bool
	}{
		"no restart policy": {nil, false},
		"always":            {ptr.To(corev1.ContainerRestartPolicyAlways), true},
		"never":             {ptr.To(corev1.ContainerRestartPolicy("Never")), false},
		"on failure":        {ptr.To(corev1.ContainerRestartPolicy("OnFailure")), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IsNativeSidecar(&corev1.Container{Name: "c", RestartPolicy: tc.policy}); got != tc.want {
				t.Fatalf("IsNativeSidecar = %v, want %v", got, tc.want)
			}
		})
	}
}
