package restartschedule

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The `kubectl rollout status` rules, per workload kind.
func TestRolloutStatus(t *testing.T) {
	meta := metav1.ObjectMeta{Generation: 2}
	dep := func(s appsv1.DeploymentStatus, mut ...func(*appsv1.Deployment)) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}, Status: s}
		for _, m := range mut {
			m(d)
		}
		return d
	}
	sts := func(s appsv1.StatefulSetStatus, partition *int32) *appsv1.StatefulSet {
		st := &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}, Status: s}
		if partition != nil {
			st.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: partition}
		}
		return st
	}
	ds := func(s appsv1.DaemonSetStatus) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: meta, Status: s}
	}
	cases := map[string]struct {
		obj    client.Object
		minGen int64
		want   rolloutState
		msg    string
	}{
		"deployment: cache older than the patch": {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}), 3, rolloutInProgress, "reach the cache"},
		"deployment: spec not observed":          {dep(appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}), 2, rolloutInProgress, "observed"},
		"deployment: updating":                   {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2}), 2, rolloutInProgress, "1 of 3 new replicas"},
		"deployment: old replicas terminating":   {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 3, AvailableReplicas: 3}), 2, rolloutInProgress, "pending termination"},
		"deployment: not yet available":          {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 2}), 2, rolloutInProgress, "available"},
		"deployment: complete":                   {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}), 2, rolloutComplete, "rolled out"},
		"deployment: progress deadline": {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Reason: "ProgressDeadlineExceeded"}}}), 2, rolloutFailed, "progress deadline"},
		"statefulset: not observed":   {sts(appsv1.StatefulSetStatus{ObservedGeneration: 1, ReadyReplicas: 3}, nil), 2, rolloutInProgress, "observed"},
		"statefulset: not ready":      {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 2}, nil), 2, rolloutInProgress, "2 of 3 pods are ready"},
		"statefulset: revisions":      {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 3, UpdatedReplicas: 1, CurrentRevision: "a", UpdateRevision: "b"}, nil), 2, rolloutInProgress, "1 of 3 pods are updated"},
		"statefulset: complete":       {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 3, UpdatedReplicas: 3, CurrentRevision: "b", UpdateRevision: "b"}, nil), 2, rolloutComplete, "rolled out"},
		"statefulset: partition wait": {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 3, UpdatedReplicas: 0, CurrentRevision: "a", UpdateRevision: "b"}, ptr.To[int32](2)), 2, rolloutInProgress, "partition"},
		"statefulset: partition done": {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 3, UpdatedReplicas: 1, CurrentRevision: "a", UpdateRevision: "b"}, ptr.To[int32](2)), 2, rolloutComplete, "partitioned"},
		"daemonset: not observed":     {ds(appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2}), 2, rolloutInProgress, "observed"},
		"daemonset: updating":         {ds(appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2}), 2, rolloutInProgress, "1 of 2 updated"},
		"daemonset: unavailable":      {ds(appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 1}), 2, rolloutInProgress, "available"},
		"daemonset: complete":         {ds(appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2}), 2, rolloutComplete, "rolled out"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, msg := rolloutStatus(tc.obj, tc.minGen)
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
