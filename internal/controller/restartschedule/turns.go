package restartschedule

import (
	"context"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// A candidate held by maxConcurrent waits for its workload's replaced pods
// to become Ready. Polling for that (PollInterval, 10s) made each turn of a
// workload whose pods cross the threshold together take a poll, however
// soon the replacements were Ready, while the last pods of a fast leak
// waited for theirs. The schedule is woken instead when a pod of such a
// workload changes readiness, as a ReplicaSet's controller is.

// awaitingTurnIndex indexes RestartSchedules by the workloads (workloadKey)
// whose candidates wait for their turn under maxConcurrent.
const awaitingTurnIndex = "status.candidates.awaitingTurn"

// holdMaxConcurrent begins the HeldBy of a candidate waiting for its turn.
const holdMaxConcurrent = "maxConcurrent "

func awaitingTurn(o client.Object) []string {
	rs := o.(*deckhandv1alpha1.RestartSchedule)
	var keys []string
	for _, c := range rs.Status.Candidates {
		if strings.HasPrefix(c.HeldBy, holdMaxConcurrent) && !slices.Contains(keys, c.Workload) {
			keys = append(keys, c.Workload)
		}
	}
	return keys
}

// podWorkload is the key of the workload that controls pod (workloadKey),
// "" when none a schedule targets does: a Deployment's pods are controlled
// by its ReplicaSet, named after it and the pod's template hash.
func podWorkload(pod *corev1.Pod) string {
	ref := controllerOf(pod)
	if ref == nil {
		return ""
	}
	switch ref.Kind {
	case "ReplicaSet":
		hash := pod.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
		name, ok := strings.CutSuffix(ref.Name, "-"+hash)
		if hash == "" || !ok {
			return ""
		}
		return workloadKey(kindDeployment, name)
	case kindStatefulSet, kindDaemonSet, kindPodSet:
		return workloadKey(ref.Kind, ref.Name)
	}
	return ""
}

// controllerOf is the pod's controller reference, nil when none: what
// metav1.GetControllerOf answers, without its copy (it runs for every pod
// of a namespace at each evaluation).
func controllerOf(pod *corev1.Pod) *metav1.OwnerReference {
	for i := range pod.OwnerReferences {
		if ref := &pod.OwnerReferences[i]; ref.Controller != nil && *ref.Controller {
			return ref
		}
	}
	return nil
}

// schedulesAwaitingTurn maps a pod to the schedules whose candidates wait
// for a turn in its workload.
func (r *Reconciler) schedulesAwaitingTurn(ctx context.Context, pod *corev1.Pod) []reconcile.Request {
	key := podWorkload(pod)
	if key == "" {
		return nil
	}
	return r.schedulesIndexed(ctx, pod.Namespace, awaitingTurnIndex, key)
}

// readinessChanged passes the pod updates that can end a turn: a pod that
// became Ready or stopped being Ready.
var readinessChanged = predicate.TypedFuncs[*corev1.Pod]{
	CreateFunc:  func(event.TypedCreateEvent[*corev1.Pod]) bool { return false },
	DeleteFunc:  func(event.TypedDeleteEvent[*corev1.Pod]) bool { return false },
	GenericFunc: func(event.TypedGenericEvent[*corev1.Pod]) bool { return false },
	UpdateFunc: func(e event.TypedUpdateEvent[*corev1.Pod]) bool {
		return podutil.IsPodReady(e.ObjectOld) != podutil.IsPodReady(e.ObjectNew)
	},
}

// podTurnSource is the pod watch that wakes schedules awaiting a turn.
// It is started with the first trigger's evaluation, with the pod lister,
// so that a manager whose schedules have no triggers watches no pods.
func (r *Reconciler) podTurnSource(cache ctrlcache.Cache) source.Source {
	return source.Kind(cache, &corev1.Pod{}, handler.TypedEnqueueRequestsFromMapFunc(r.schedulesAwaitingTurn), readinessChanged)
}
