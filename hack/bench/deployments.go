package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// waitAvailable polls until ready(ns) reports true, up to 5 minutes.
func waitAvailable(ctx context.Context, ready func(ctx context.Context) (bool, string)) error {
	var state string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		ok, s := ready(ctx)
		state = s
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("%w (%s)", err, state)
	}
	return nil
}

// countDeployments lists the Deployments of ns and counts those for which
// ok holds.
func countDeployments(ctx context.Context, e *env, ns string, ok func(*appsv1.Deployment) bool) (total, matched int, err error) {
	var dl appsv1.DeploymentList
	if err := e.c.List(ctx, &dl, client.InNamespace(ns)); err != nil {
		return 0, 0, err
	}
	for i := range dl.Items {
		if ok(&dl.Items[i]) {
			matched++
		}
	}
	return len(dl.Items), matched, nil
}

// waitDeployments waits until the n Deployments of ns are at generation gen
// (or later) and rolled out: observed, every replica updated and available,
// none of an older ReplicaSet left.
func waitDeployments(ctx context.Context, e *env, ns string, n int, gen int64, timeout time.Duration) error {
	var state string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		total, done, err := countDeployments(ctx, e, ns, func(d *appsv1.Deployment) bool {
			want := ptr.Deref(d.Spec.Replicas, 1)
			return d.Generation >= gen && d.Status.ObservedGeneration == d.Generation &&
				d.Status.UpdatedReplicas == want && d.Status.Replicas == want && d.Status.AvailableReplicas == want
		})
		state = fmt.Sprintf("%d Deployments, %d rolled out", total, done)
		return err == nil && total >= n && done == total, nil
	})
	if err != nil {
		return fmt.Errorf("%w (%s)", err, state)
	}
	return nil
}

// deploymentsAvailable reports whether every Deployment of ns (n expected)
// is observed at its generation and Available, and n Services exist.
func deploymentsAvailable(e *env, ns string, n int) func(ctx context.Context) (bool, string) {
	return func(ctx context.Context) (bool, string) {
		var sl corev1.ServiceList
		total, avail, err := countDeployments(ctx, e, ns, func(d *appsv1.Deployment) bool {
			return d.Status.ObservedGeneration == d.Generation && deploymentCondition(d, appsv1.DeploymentAvailable)
		})
		if err != nil || e.c.List(ctx, &sl, client.InNamespace(ns)) != nil {
			return false, "list failed"
		}
		return total >= n && len(sl.Items) >= n && avail == n,
			fmt.Sprintf("%d Deployments (%d available), %d Services", total, avail, len(sl.Items))
	}
}

// deploymentCondition reports whether d has condition typ True.
func deploymentCondition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
