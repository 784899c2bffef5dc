package testutil

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// DisruptionWatch follows, from a watch, the pods of a namespace that a
// selector matches and that a workload of desired replicas runs, and
// records the most that were ever unavailable at once (desired minus the
// pods that are Ready and not being deleted: a pod evicted and not yet
// replaced counts, however short the moment) and every pod that was deleted
// (got a deletionTimestamp), in order.
type DisruptionWatch struct {
	mu       sync.Mutex
	desired  int
	selector labels.Selector
	pods     map[types.UID]*corev1.Pod
	max      int
	deleted  []types.UID
	names    map[types.UID]string
	history  []string
	stop     func()
}

// WatchDisruptions starts a DisruptionWatch; it stops when t ends or when
// Stop is called.
func WatchDisruptions(t testing.TB, cs kubernetes.Interface, ns string, selector labels.Selector, desired int) *DisruptionWatch {
	t.Helper()
	w := &DisruptionWatch{desired: desired, selector: selector, pods: map[types.UID]*corev1.Pod{}, names: map[types.UID]string{}}
	// The pods listed are the starting point (WatchPods seeds them all
	// before it hands on the first event); counting starts from them.
	w.stop = WatchPods(t, cs, ns, func(p *corev1.Pod) {
		if w.selector.Matches(labels.Set(p.Labels)) {
			w.mu.Lock()
			w.pods[p.UID], w.names[p.UID] = p, p.Name
			w.mu.Unlock()
		}
	}, w.observe)
	return w
}

func (w *DisruptionWatch) observe(ev watch.EventType, p *corev1.Pod) {
	if !w.selector.Matches(labels.Set(p.Labels)) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.names[p.UID] = p.Name
	if prev := w.pods[p.UID]; (prev == nil || prev.DeletionTimestamp == nil) && (p.DeletionTimestamp != nil || ev == watch.Deleted) {
		w.deleted = append(w.deleted, p.UID)
	}
	if ev == watch.Deleted {
		delete(w.pods, p.UID)
	} else {
		w.pods[p.UID] = p
	}
	available := 0
	for _, q := range w.pods {
		if q.DeletionTimestamp == nil && podutil.IsPodReady(q) {
			available++
		}
	}
	n := w.desired - available
	if n > w.max {
		w.max = n
	}
	ready := podutil.IsPodReady(p)
	w.history = append(w.history, fmt.Sprintf("%s %s ready=%v deleting=%v: %d unavailable", ev, p.Name, ready, p.DeletionTimestamp != nil, n))
}

// History returns one line per event observed: the pod, its state and the
// number of pods unavailable after it; for the message of a failed test.
func (w *DisruptionWatch) History() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.history, "\n")
}

// Stop ends the watch.
func (w *DisruptionWatch) Stop() { w.stop() }

// MaxUnavailable is the most pods that were unavailable at once.
func (w *DisruptionWatch) MaxUnavailable() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.max
}

// Deleted returns the UIDs of the pods that were deleted, in order, with
// their names.
func (w *DisruptionWatch) Deleted() ([]types.UID, map[types.UID]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	names := make(map[types.UID]string, len(w.names))
	for k, v := range w.names {
		names[k] = v
	}
	return append([]types.UID(nil), w.deleted...), names
}

// UnexpectedDeletions names, in order, each pod deleted that old does not
// hold and each pod deleted again: what a rollout that replaces each old pod
// once, and nothing else, leaves empty. A nil old holds every pod.
func (w *DisruptionWatch) UnexpectedDeletions(old map[types.UID]bool) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var unexpected []string
	seen := map[types.UID]bool{}
	for _, uid := range w.deleted {
		if (old != nil && !old[uid]) || seen[uid] {
			unexpected = append(unexpected, w.names[uid])
		}
		seen[uid] = true
	}
	return unexpected
}
