package podset

import (
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// maxNamedPods is how many pod names one summary Event lists.
const maxNamedPods = 10

// podEventBatch collects the pods one step of a sync changed (created,
// deleted, updated in place) and reports them as one Event. An Event per pod
// doubled the API writes of a scale-up (docs/benchmarks.md, item 6): the
// ReplicaSet controller gets away with one per pod only because client-go's
// event correlator folds them into one aggregate Event, which the events.k8s.io
// recorder Deckhand uses does not do.
type podEventBatch struct {
	mu   sync.Mutex
	pods []*corev1.Pod
}

func (b *podEventBatch) add(pod *corev1.Pod) {
	b.mu.Lock()
	b.pods = append(b.pods, pod)
	b.mu.Unlock()
}

// emit sends one Normal Event: for a single pod the same Event the
// ReplicaSet controller sends ("Created pod: web-x7k2p", regarding the
// PodSet and related to the pod), for several the count and the first names.
func (b *podEventBatch) emit(rec events.EventRecorder, ps *deckhandv1alpha1.PodSet, reason, action, verb, suffix string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch len(b.pods) {
	case 0:
		return
	case 1:
		rec.Eventf(ps, b.pods[0], corev1.EventTypeNormal, reason, action, "%s pod%s: %v", verb, suffix, b.pods[0].Name)
		return
	}
	names := make([]string, 0, maxNamedPods)
	for _, p := range b.pods[:min(len(b.pods), maxNamedPods)] {
		names = append(names, p.Name)
	}
	more := ""
	if n := len(b.pods) - len(names); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	rec.Eventf(ps, nil, corev1.EventTypeNormal, reason, action, "%s %d pods%s: %s%s", verb, len(b.pods), suffix, strings.Join(names, ", "), more)
}
