package podset_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// The tests of this file scale in bursts while the controller's view of
// the pods lags or restarts: its expectations must keep it from creating or
// deleting a pod twice.

// podWatch records, from a watch over the whole run, the largest number of
// active pods and every pod UID ever seen in a namespace.
type podWatch struct {
	mu        sync.Mutex
	active    map[types.UID]bool
	seen      map[types.UID]bool
	maxActive int
	stop      func()
}

func watchPods(t *testing.T, ns string) *podWatch {
	t.Helper()
	pw := &podWatch{active: map[types.UID]bool{}, seen: map[types.UID]bool{}}
	pw.stop = testutil.WatchPods(t, env.Clientset, ns, nil, func(ev watch.EventType, p *corev1.Pod) {
		pw.mu.Lock()
		defer pw.mu.Unlock()
		pw.seen[p.UID] = true
		if ev == watch.Deleted || !podutil.IsPodActive(p) {
			delete(pw.active, p.UID)
		} else {
			pw.active[p.UID] = true
		}
		if p.Labels["app"] != "marker" {
			pw.maxActive = max(pw.maxActive, len(pw.active))
		}
	})
	return pw
}

// createWatchedPodSet creates, in a namespace of the test's own, a PodSet of
// replicas and a podWatch over the namespace started before it.
func createWatchedPodSet(t *testing.T, name string, replicas int32) (*deckhandv1alpha1.PodSet, *podWatch) {
	t.Helper()
	ns := env.Namespace(t)
	pw := watchPods(t, ns)
	ps := newPodSet(ns, name, replicas)
	mustCreate(t, ps)
	return ps, pw
}

// TestBurstWithSlowCache scales to 100 (then down to 10 and up to 60) with
// a manager whose pod informer lags by design: every read of the watch
// stream waits 40ms, so most syncs run on a cache that has not yet seen the
// previous sync's writes. Expectations must keep the controller from
// creating or deleting twice: a watch over the whole run never sees more
// than the desired number of active pods, and no pod beyond the ones needed
// is ever created.
func TestBurstWithSlowCache(t *testing.T) {
	useManagerSettings(t, managerSettings{slowWatch: 40 * time.Millisecond})
	restartManager(t)
	ps, pw := createWatchedPodSet(t, "slow", 100)
	waitConverged(t, ps, 100, 3*time.Minute)
	pw.mu.Lock()
	if pw.maxActive > 100 {
		t.Errorf("scaling to 100: the watch saw %d active pods at once", pw.maxActive)
	}
	pw.mu.Unlock()
	setReplicas(t, ps, 10)
	waitConverged(t, ps, 10, 3*time.Minute)
	setReplicas(t, ps, 60)
	waitConverged(t, ps, 60, 3*time.Minute)
	// 100 created, 90 deleted, 50 created: exactly 150 pods ever.
	pw.wantPods(t, ps.Namespace, 100, 150)
	if len(pw.active) != 60 {
		t.Fatalf("the watch ends with %d active pods, want 60", len(pw.active))
	}
}

// wantPods waits until the watch has seen every change in ns so far and
// fails unless it saw at most maxActive active pods at once and exactly
// total distinct pods in all (more would be duplicate creates).
func (pw *podWatch) wantPods(t *testing.T, ns string, maxActive, total int) {
	t.Helper()
	pw.catchUp(t, ns)
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if pw.maxActive > maxActive {
		t.Fatalf("the watch saw %d active pods at once, want at most %d", pw.maxActive, maxActive)
	}
	if len(pw.seen) != total {
		t.Fatalf("the watch saw %d distinct pods, want exactly %d (no duplicate creates)", len(pw.seen), total)
	}
}

// catchUp creates a marker pod and waits until the watch shows it: watch
// events arrive in resourceVersion order, so the watch has then shown every
// earlier change. The marker is left out of the counts.
func (pw *podWatch) catchUp(t *testing.T, ns string) {
	t.Helper()
	marker := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "marker", Labels: map[string]string{"app": "marker"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: pauseImage}}},
	}
	mustCreate(t, marker)
	eventually(t, time.Minute, "the watch catches up", func(context.Context) (bool, string, error) {
		pw.mu.Lock()
		defer pw.mu.Unlock()
		return pw.seen[marker.UID], "", nil
	})
	pw.stop()
	pw.mu.Lock()
	delete(pw.seen, marker.UID)
	delete(pw.active, marker.UID)
	pw.mu.Unlock()
}

// TestBurstNeverOvershoots scales to 100 and restarts the manager in the
// middle: the new manager starts with empty expectations and a fresh cache,
// the old one may have had creates in flight. A watch over the whole run
// must never see more than 100 active pods, and exactly 100 pods must ever
// have been created (no duplicate created and then deleted).
func TestBurstNeverOvershoots(t *testing.T) {
	ps, pw := createWatchedPodSet(t, "burst", 100)

	eventually(t, time.Minute, "some pods exist before the restart", func(ctx context.Context) (bool, string, error) {
		pods, err := ownedPods(ctx, ps)
		return len(pods) >= 7, fmt.Sprintf("%d pods", len(pods)), err
	})
	restartManager(t)
	waitConverged(t, ps, 100, 3*time.Minute)
	pw.wantPods(t, ps.Namespace, 100, 100)
}
