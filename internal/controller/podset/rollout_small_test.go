package podset_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/test/health"
)

// TestDefaultStrategySmallReplicas changes the image of PodSets with the
// default update strategy (maxSurge 25%, maxUnavailable 25%, in place) at
// 1, 2, 3 and 4 replicas. 25% of 1 to 3 rounds to maxUnavailable 0 and
// maxSurge 1: the rollout must run on one surge pod, update every original
// pod in place and remove the surge pod; at 4 replicas (1 and 1) it updates
// the pods in place one at a time without a surge. A pod watch checks that
// there were never more than replicas+maxSurge pods (terminating ones
// included) nor fewer than replicas-maxUnavailable available ones.
func TestDefaultStrategySmallReplicas(t *testing.T) {
	cases := []struct {
		replicas                 int32
		maxSurge, maxUnavailable int
	}{
		{1, 1, 0}, {2, 1, 0}, {3, 1, 0}, {4, 1, 1},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("replicas=%d", tc.replicas), func(t *testing.T) {
			t.Parallel()
			ps := createPodSet(t, "small", tc.replicas)
			before := waitConverged(t, ps, tc.replicas, 2*time.Minute)
			uids := podUIDs(mustOwned(t, before))

			bw := watchBudgets(t, ps.Namespace)
			defer bw.stop()
			start := time.Now()
			mergePatch(t, before, `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"registry.k8s.io/pause:3.9"}]}}}}`)
			after := waitRolledOut(t, ps, tc.replicas)
			took := time.Since(start)
			bw.settle(t, int(tc.replicas))

			bw.mu.Lock()
			t.Logf("rolled out in %s: at most %d pods (%d with terminating ones), at least %d available",
				took.Round(time.Millisecond), bw.maxActive, bw.maxTotal, bw.minAvailable)
			if limit := int(tc.replicas) + tc.maxSurge; bw.maxTotal > limit {
				t.Errorf("%d pods at once (terminating included), want at most replicas+maxSurge = %d", bw.maxTotal, limit)
			}
			if floor := int(tc.replicas) - tc.maxUnavailable; bw.minAvailable < floor {
				t.Errorf("%d pods available at one point, want at least replicas-maxUnavailable = %d", bw.minAvailable, floor)
			}
			if tc.maxUnavailable == 0 && bw.maxActive != int(tc.replicas)+1 {
				t.Errorf("at most %d pods: with maxUnavailable 0 the rollout must have run on a surge pod", bw.maxActive)
			}
			bw.mu.Unlock()

			var names []string
			for _, p := range mustOwned(t, after) {
				names = append(names, p.Name)
				if uid, ok := uids[p.Name]; !ok || uid != p.UID {
					t.Errorf("pod %s (uid %s) is not one of the original pods %v: every pod should have been updated in place",
						p.Name, p.UID, uids)
				}
				if p.Labels[deckhandv1alpha1.PodSetRevisionLabel] != after.Status.UpdateRevision || p.Spec.Containers[0].Image != "registry.k8s.io/pause:3.9" {
					t.Errorf("pod %s: revision %s, image %s", p.Name, p.Labels[deckhandv1alpha1.PodSetRevisionLabel], p.Spec.Containers[0].Image)
				}
			}
			if len(names) != len(uids) {
				slices.Sort(names)
				t.Errorf("pods %v after the rollout, want the %d original ones", names, len(uids))
			}
		})
	}
}

// TestDefaultStrategyPausedThenResumed pauses a PodSet of 2 replicas with
// the default strategy, changes its image, and resumes it: nothing moves
// while paused, and on resume the rollout runs on the surge as it does
// unpaused, within the same bounds, keeping the original pods.
func TestDefaultStrategyPausedThenResumed(t *testing.T) {
	const replicas = 2
	ps := createPodSet(t, "resume", replicas)
	before := waitConverged(t, ps, replicas, 2*time.Minute)
	uids := podUIDs(mustOwned(t, before))
	bw := watchBudgets(t, ps.Namespace)
	defer bw.stop()

	mergePatch(t, before, `{"spec":{"paused":true}}`)
	mergePatch(t, before, `{"spec":{"template":{"spec":{"containers":[{"name":"main","image":"registry.k8s.io/pause:3.9"}]}}}}`)
	health.Wait(t, env.Client, before, time.Minute, health.IsPaused(podset.ReasonUpdatePaused))
	if old := oldPods(t, before); len(old) != replicas {
		t.Fatalf("%d old-revision pods while paused, want %d", len(old), replicas)
	}

	mergePatch(t, before, `{"spec":{"paused":false}}`)
	after := waitRolledOut(t, ps, replicas)
	bw.settle(t, replicas)

	bw.mu.Lock()
	t.Logf("at most %d pods (%d with terminating ones), at least %d available", bw.maxActive, bw.maxTotal, bw.minAvailable)
	if bw.maxTotal > replicas+1 || bw.minAvailable < replicas || bw.maxActive != replicas+1 {
		t.Errorf("at most %d pods, at least %d available: want a surge of exactly 1 pod and none unavailable", bw.maxTotal, bw.minAvailable)
	}
	bw.mu.Unlock()
	for _, p := range mustOwned(t, after) {
		if uid, ok := uids[p.Name]; !ok || uid != p.UID {
			t.Errorf("pod %s (uid %s) is not one of the original pods %v", p.Name, p.UID, uids)
		}
	}
}
