package podutil

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodResizeState(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cpu := func(v string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(v)}}
	}
	pod := func(spec string, status *corev1.ResourceRequirements, conds ...corev1.PodCondition) *corev1.Pod {
		return &corev1.Pod{
			Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: cpu(spec)}, {Name: "other"}}},
			Status: corev1.PodStatus{Conditions: conds, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Resources: status}, {Name: "other"}}},
		}
	}
	reported := func(v string) *corev1.ResourceRequirements { r := cpu(v); return &r }
	cond := func(typ corev1.PodConditionType, reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, LastTransitionTime: metav1.NewTime(since)}
	}
	cases := map[string]struct {
		pod  *corev1.Pod
		want ResizeState
	}{
		"done":                             {pod(("200m"), reported("0.2")), ResizeDone},
		"status behind":                    {pod("200m", reported("100m")), ResizeInProgress},
		"nothing reported":                 {pod("200m", nil), ResizeInProgress},
		"in progress":                      {pod("200m", reported("200m"), cond(corev1.PodResizeInProgress, "")), ResizeInProgress},
		"deferred":                         {pod("200m", reported("100m"), cond(corev1.PodResizePending, corev1.PodReasonDeferred)), ResizeDeferred},
		"infeasible":                       {pod("200m", reported("100m"), cond(corev1.PodResizePending, corev1.PodReasonInfeasible)), ResizeInfeasible},
		"infeasible wins over in progress": {pod("200m", reported("100m"), cond(corev1.PodResizeInProgress, ""), cond(corev1.PodResizePending, corev1.PodReasonInfeasible)), ResizeInfeasible},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, at := PodResizeState(tc.pod, []string{"c", "other", "absent"})
			if got != tc.want {
				t.Errorf("PodResizeState = %v, want %v", got, tc.want)
			}
			if (got == ResizeDeferred || got == ResizeInfeasible) && !at.Equal(since) {
				t.Errorf("since = %v, want the condition's lastTransitionTime %v", at, since)
			}
		})
	}
}
