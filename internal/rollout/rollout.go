package rollout

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// State is where a workload's rollout stands.
type State int

const (
	// InProgress means the rollout has not finished yet.
	InProgress State = iota
	// Complete means every replica the rollout must update is updated and
	// available.
	Complete
	// Failed means the rollout will not finish without a change: a
	// Deployment past its progress deadline, or an unsupported kind.
	Failed
)

// progressDeadlineExceeded is the reason the Deployment controller gives its
// Progressing condition when a rollout exceeded progressDeadlineSeconds.
const progressDeadlineExceeded = "ProgressDeadlineExceeded"

// Status applies `kubectl rollout status`'s rules to a Deployment,
// StatefulSet or DaemonSet (and the same rules to a PodSet) and says, in a message, why it stands where it
// does. A workload whose controller has not yet observed its latest spec is
// in progress, whatever its status says.
func Status(obj client.Object) (State, string) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		return deploymentStatus(w)
	case *appsv1.StatefulSet:
		return statefulSetStatus(w)
	case *appsv1.DaemonSet:
		return daemonSetStatus(w)
	case *deckhandv1alpha1.PodSet:
		return podSetStatus(w)
	}
	return Failed, "unsupported workload kind"
}

// IsComplete reports whether Status finds the rollout Complete.
func IsComplete(obj client.Object) bool {
	s, _ := Status(obj)
	return s == Complete
}

func deploymentStatus(d *appsv1.Deployment) (State, string) {
	if d.Status.ObservedGeneration < d.Generation {
		return InProgress, "waiting for the Deployment spec update to be observed"
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == progressDeadlineExceeded {
			return Failed, fmt.Sprintf("Deployment exceeded its progress deadline: %s", c.Message)
		}
	}
	want := replicas(d.Spec.Replicas)
	s := d.Status
	switch {
	case s.UpdatedReplicas < want:
		return InProgress, fmt.Sprintf("%d of %d new replicas have been updated", s.UpdatedReplicas, want)
	case s.Replicas > s.UpdatedReplicas:
		return InProgress, fmt.Sprintf("%d old replicas are pending termination", s.Replicas-s.UpdatedReplicas)
	case s.AvailableReplicas < s.UpdatedReplicas:
		return InProgress, fmt.Sprintf("%d of %d updated replicas are available", s.AvailableReplicas, s.UpdatedReplicas)
	}
	return Complete, fmt.Sprintf("Deployment rolled out: %d replicas updated and available", s.UpdatedReplicas)
}

// statefulSetStatus also judges an OnDelete StatefulSet, which kubectl
// refuses to: it is rolled out once every pod runs the update revision, as
// with RollingUpdate.
func statefulSetStatus(sts *appsv1.StatefulSet) (State, string) {
	s := sts.Status
	if s.ObservedGeneration == 0 || s.ObservedGeneration < sts.Generation {
		return InProgress, "waiting for the StatefulSet spec update to be observed"
	}
	want := replicas(sts.Spec.Replicas)
	if s.ReadyReplicas < want {
		return InProgress, fmt.Sprintf("%d of %d pods are ready", s.ReadyReplicas, want)
	}
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil && *ru.Partition > 0 {
		if s.UpdatedReplicas < want-*ru.Partition {
			return InProgress, fmt.Sprintf("%d of %d pods above the partition are updated", s.UpdatedReplicas, want-*ru.Partition)
		}
		return Complete, fmt.Sprintf("partitioned StatefulSet rolled out: %d pods updated", s.UpdatedReplicas)
	}
	if s.UpdateRevision != s.CurrentRevision {
		return InProgress, fmt.Sprintf("%d of %d pods are updated", s.UpdatedReplicas, want)
	}
	return Complete, fmt.Sprintf("StatefulSet rolled out: %d pods at revision %s", s.ReadyReplicas, s.UpdateRevision)
}

func daemonSetStatus(ds *appsv1.DaemonSet) (State, string) {
	s := ds.Status
	if s.ObservedGeneration < ds.Generation {
		return InProgress, "waiting for the DaemonSet spec update to be observed"
	}
	if s.UpdatedNumberScheduled < s.DesiredNumberScheduled {
		return InProgress, fmt.Sprintf("%d of %d updated pods are scheduled", s.UpdatedNumberScheduled, s.DesiredNumberScheduled)
	}
	if s.NumberAvailable < s.DesiredNumberScheduled {
		return InProgress, fmt.Sprintf("%d of %d updated pods are available", s.NumberAvailable, s.DesiredNumberScheduled)
	}
	return Complete, fmt.Sprintf("DaemonSet rolled out: %d pods updated and available", s.NumberAvailable)
}

// replicas is a spec's replica count, defaulted as the API server does.
func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}
