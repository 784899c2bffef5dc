package testenv

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FakeKubelet plays the kubelet's part of an in-place image update, which
// kwok does not: kwok walks a pod from Pending to Ready once and never
// reflects a later image change in the container statuses. When a running
// pod's container has a spec image that differs from its status image, the
// fake kubelet first marks the container and the pod not ready (the
// container restarting), then, restart later, reports the new image, ready
// again. It works on the pods of ns through c until stop is called.
func FakeKubelet(c client.Client, ns string, restart time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		notReadySince := map[string]time.Time{}
		for ctx.Err() == nil {
			var pods corev1.PodList
			if err := c.List(ctx, &pods, client.InNamespace(ns)); err == nil {
				for i := range pods.Items {
					if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
						restartChanged(ctx, c, p, notReadySince, restart)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// restartChanged moves p's containers whose image changed one step through
// the restart and writes the status if anything changed.
func restartChanged(ctx context.Context, c client.Client, p *corev1.Pod, notReadySince map[string]time.Time, restart time.Duration) {
	changed := false
	for j := range p.Status.ContainerStatuses {
		cs := &p.Status.ContainerStatuses[j]
		want := ""
		for _, sc := range p.Spec.Containers {
			if sc.Name == cs.Name {
				want = sc.Image
			}
		}
		if want == "" || want == cs.Image {
			continue
		}
		key := p.Name + "/" + cs.Name
		switch since, ok := notReadySince[key]; {
		case !ok:
			cs.Ready = false
			notReadySince[key] = time.Now()
			changed = true
		case time.Since(since) >= restart:
			cs.Image, cs.Ready = want, true
			cs.RestartCount++
			delete(notReadySince, key)
			changed = true
		}
	}
	if !changed {
		return
	}
	all := true
	for _, cs := range p.Status.ContainerStatuses {
		all = all && cs.Ready
	}
	for j := range p.Status.Conditions {
		cond := &p.Status.Conditions[j]
		if cond.Type == corev1.PodReady || cond.Type == corev1.ContainersReady {
			status := corev1.ConditionFalse
			if all {
				status = corev1.ConditionTrue
			}
			if cond.Status != status {
				cond.Status = status
				cond.LastTransitionTime = metav1.Now()
			}
		}
	}
	if err := c.Status().Update(ctx, p); err != nil {
		// A conflict with the controller's patch: read again next round.
		for j := range p.Status.ContainerStatuses {
			delete(notReadySince, p.Name+"/"+p.Status.ContainerStatuses[j].Name)
		}
	}
}
