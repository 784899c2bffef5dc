package rollout

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

func TestStatus(t *testing.T) {
	meta := metav1.ObjectMeta{Generation: 2}
	dep := func(s appsv1.DeploymentStatus, mut ...func(*appsv1.Deployment)) *appsv1.Deployment {
		d := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)}, Status: s}
		for _, m := range mut {
			m(d)
		}
		return d
	}
	sts := func(s appsv1.StatefulSetStatus, strategy appsv1.StatefulSetUpdateStrategy) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), UpdateStrategy: strategy}, Status: s}
	}
	rolling := appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	partition := func(p int32) appsv1.StatefulSetUpdateStrategy {
		return appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(p)}}
	}
	onDelete := appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	ps := func(s deckhandv1alpha1.PodSetStatus) *deckhandv1alpha1.PodSet {
		return &deckhandv1alpha1.PodSet{ObjectMeta: meta, Spec: deckhandv1alpha1.PodSetSpec{Replicas: ptr.To[int32](3)}, Status: s}
	}
	ds := func(s appsv1.DaemonSetStatus) *appsv1.DaemonSet {
		return &appsv1.DaemonSet{ObjectMeta: meta, Status: s}
	}
	deadline := func(s corev1.ConditionStatus) []appsv1.DeploymentCondition {
		return []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: s, Reason: "ProgressDeadlineExceeded", Message: "ReplicaSet has timed out progressing"}}
	}
	cases := map[string]struct {
		obj  client.Object
		want State
		msg  string
	}{
		"deployment: spec not observed":           {dep(appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}), InProgress, "observed"},
		"deployment: updating":                    {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2}), InProgress, "1 of 3 new replicas"},
		"deployment: old replicas terminating":    {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 3, AvailableReplicas: 3}), InProgress, "1 old replicas are pending termination"},
		"deployment: not yet available":           {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 2}), InProgress, "2 of 3 updated replicas are available"},
		"deployment: complete":                    {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}), Complete, "rolled out"},
		"deployment: observed a newer generation": {dep(appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3}), Complete, "rolled out"},
		"deployment: replicas unset means one": {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1},
			func(d *appsv1.Deployment) { d.Spec.Replicas = nil }), Complete, "rolled out"},
		"deployment: replicas unset, none updated": {dep(appsv1.DeploymentStatus{ObservedGeneration: 2},
			func(d *appsv1.Deployment) { d.Spec.Replicas = nil }), InProgress, "0 of 1 new replicas"},
		"deployment: scaled to zero": {dep(appsv1.DeploymentStatus{ObservedGeneration: 2},
			func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](0) }), Complete, "rolled out"},
		"deployment: progress deadline exceeded": {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, Conditions: deadline(corev1.ConditionFalse)}),
			Failed, "exceeded its progress deadline: ReplicaSet has timed out"},
		"deployment: the deadline reason decides, not the status": {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3, Conditions: deadline(corev1.ConditionUnknown)}),
			Failed, "progress deadline"},
		"deployment: deadline not judged before the spec is observed": {dep(appsv1.DeploymentStatus{ObservedGeneration: 1, Conditions: deadline(corev1.ConditionFalse)}),
			InProgress, "observed"},
		"deployment: progressing normally": {dep(appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, AvailableReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"}}}), Complete, "rolled out"},

		"statefulset: never observed":                   {sts(appsv1.StatefulSetStatus{ReadyReplicas: 3}, rolling), InProgress, "observed"},
		"statefulset: spec not observed":                {sts(appsv1.StatefulSetStatus{ObservedGeneration: 1, ReadyReplicas: 3}, rolling), InProgress, "observed"},
		"statefulset: not ready":                        {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 2}, rolling), InProgress, "2 of 3 pods are ready"},
		"statefulset: revisions differ":                 {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 3, UpdatedReplicas: 1, CurrentRevision: "a", UpdateRevision: "b"}, rolling), InProgress, "1 of 3 pods are updated"},
		"statefulset: complete":                         {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 3, UpdatedReplicas: 3, CurrentRevision: "b", UpdateRevision: "b"}, rolling), Complete, "rolled out: 3 pods at revision b"},
		"statefulset: partition waiting":                {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 3, UpdatedReplicas: 0, CurrentRevision: "a", UpdateRevision: "b"}, partition(2)), InProgress, "0 of 1 pods above the partition"},
		"statefulset: partition done":                   {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 3, UpdatedReplicas: 1, CurrentRevision: "a", UpdateRevision: "b"}, partition(2)), Complete, "partitioned"},
		"statefulset: partition not ready":              {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 2, UpdatedReplicas: 1, CurrentRevision: "a", UpdateRevision: "b"}, partition(2)), InProgress, "2 of 3 pods are ready"},
		"statefulset: partition zero is a full rollout": {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 3, UpdatedReplicas: 1, CurrentRevision: "a", UpdateRevision: "b"}, partition(0)), InProgress, "1 of 3 pods are updated"},
		"statefulset: on delete, pods not replaced":     {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 3, UpdatedReplicas: 0, CurrentRevision: "a", UpdateRevision: "b"}, onDelete), InProgress, "0 of 3 pods are updated"},
		"statefulset: on delete, every pod replaced":    {sts(appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 3, UpdatedReplicas: 3, CurrentRevision: "b", UpdateRevision: "b"}, onDelete), Complete, "rolled out"},

		"daemonset: spec not observed": {ds(appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2}), InProgress, "observed"},
		"daemonset: updating":          {ds(appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2}), InProgress, "1 of 2 updated pods are scheduled"},
		"daemonset: unavailable":       {ds(appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 1}), InProgress, "1 of 2 updated pods are available"},
		"daemonset: complete":          {ds(appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2}), Complete, "rolled out"},
		"daemonset: no nodes":          {ds(appsv1.DaemonSetStatus{ObservedGeneration: 2}), Complete, "rolled out"},

		"podset: spec not observed":    {ps(deckhandv1alpha1.PodSetStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}), InProgress, "observed"},
		"podset: updating":             {ps(deckhandv1alpha1.PodSetStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3}), InProgress, "1 of 3 new replicas"},
		"podset: old pods terminating": {ps(deckhandv1alpha1.PodSetStatus{ObservedGeneration: 2, Replicas: 4, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}), InProgress, "1 old replicas"},
		"podset: not ready":            {ps(deckhandv1alpha1.PodSetStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 2}), InProgress, "2 of 3 replicas are ready"},
		"podset: not yet available":    {ps(deckhandv1alpha1.PodSetStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 2}), InProgress, "2 of 3 updated replicas are available"},
		"podset: complete":             {ps(deckhandv1alpha1.PodSetStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}), Complete, "PodSet rolled out"},
		"podset: progress deadline": {ps(deckhandv1alpha1.PodSetStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1,
			Conditions: []metav1.Condition{{Type: deckhandv1alpha1.PodSetProgressingCondition, Status: metav1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: "no progress for 600s"}}}), Failed, "progress deadline: no progress"},

		"unsupported kind": {&appsv1.ReplicaSet{ObjectMeta: meta}, Failed, "unsupported"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, msg := Status(tc.obj)
			if got != tc.want || !strings.Contains(msg, tc.msg) {
				t.Fatalf("Status = %d %q, want %d with %q", got, msg, tc.want, tc.msg)
			}
			if done := IsComplete(tc.obj); done != (tc.want == Complete) {
				t.Fatalf("IsComplete = %v with Status %d", done, got)
			}
		})
	}
}
