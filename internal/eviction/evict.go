package eviction

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Result is how one eviction went.
type Result int

const (
	// Evicted: the API server accepted the eviction; the pod is being deleted.
	Evicted Result = iota
	// Blocked: a PodDisruptionBudget refused it (HTTP 429). Nothing was
	// done; the caller waits and tries again, and never forces a delete.
	Blocked
	// Stale: the pod is gone or no longer the one the caller saw (a
	// precondition failed). Nothing was done.
	Stale
	// Failed: any other error.
	Failed
)

// String is the result as a metric label value.
func (r Result) String() string {
	switch r {
	case Evicted:
		return "success"
	case Blocked:
		return "blocked"
	case Stale:
		return "stale"
	default:
		return "error"
	}
}

// Evict asks the Eviction API to evict pod on the condition that it is still
// the pod with pod's UID and, when sameVersion is set, pod's resourceVersion
// too. The UID precondition keeps a same-named successor safe; the
// resourceVersion one also refuses a pod that changed since it was read (for
// example one another process evicted already, which carries a
// deletionTimestamp and so a newer resourceVersion). The API server checks
// the PodDisruptionBudgets that select the pod.
func Evict(ctx context.Context, c client.SubResourceClientConstructor, pod *corev1.Pod, sameVersion bool) (Result, error) {
	pre := &metav1.Preconditions{UID: &pod.UID}
	if sameVersion {
		rv := pod.ResourceVersion
		pre.ResourceVersion = &rv
	}
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: pre},
	}
	err := c.SubResource("eviction").Create(ctx, target, ev)
	switch {
	case err == nil:
		return Evicted, nil
	case apierrors.IsTooManyRequests(err):
		return Blocked, err
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return Stale, err
	default:
		return Failed, err
	}
}

// DisruptionMessage is the API server's reason for refusing an eviction: the
// DisruptionBudget cause names the budget ("The disruption budget web needs
// 2 healthy pods and has 2 currently"), else the error's message.
func DisruptionMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if d := status.Status().Details; d != nil {
			for _, c := range d.Causes {
				if c.Type == policyv1.DisruptionBudgetCause {
					return c.Message
				}
			}
		}
		return status.Status().Message
	}
	return err.Error()
}
