package reliability

import (
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
)

// rollouts counts, from a watch on every Deployment of a namespace, the
// rollouts the cluster performed: each generation bump is one change of the
// pod template (nothing else writes these Deployments' specs). Each is
// attributed to the slot the template's restarted-at annotation names after
// it, so a second rollout for one slot is seen whatever caused it.
type rollouts struct {
	mu         sync.Mutex
	gen        map[string]int64
	total      map[string]int
	perSlot    map[string]map[string]int // Deployment -> slot -> rollouts
	lastSlot   map[string]string
	violations []string
}

func watchRollouts(t *testing.T, ns string) *rollouts {
	t.Helper()
	r := &rollouts{gen: map[string]int64{}, total: map[string]int{}, perSlot: map[string]map[string]int{}, lastSlot: map[string]string{}}
	f := informers.NewSharedInformerFactoryWithOptions(suite.clientset, 0, informers.WithNamespace(ns))
	inf := f.Apps().V1().Deployments().Informer()
	observe := func(obj any) {
		if d, ok := obj.(*appsv1.Deployment); ok {
			r.observe(d)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: observe, UpdateFunc: func(_, o any) { observe(o) }}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	f.Start(stop)
	if !toolscache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("Deployment informer did not sync")
	}
	t.Cleanup(func() { close(stop); f.Shutdown() })
	return r
}

func (r *rollouts) observe(d *appsv1.Deployment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev, seen := r.gen[d.Name]
	r.gen[d.Name] = max(prev, d.Generation)
	if !seen || d.Generation <= prev {
		return
	}
	n := int(d.Generation - prev)
	slot := d.Spec.Template.Annotations[deckhandv1alpha1.RestartedAtAnnotation]
	r.total[d.Name] += n
	if r.perSlot[d.Name] == nil {
		r.perSlot[d.Name] = map[string]int{}
	}
	r.perSlot[d.Name][slot] += n
	if _, err := time.Parse(time.RFC3339, slot); err != nil {
		r.violations = append(r.violations, fmt.Sprintf("Deployment %s rolled out with restarted-at %q, not a slot", d.Name, slot))
	}
	if c := r.perSlot[d.Name][slot]; c > 1 {
		r.violations = append(r.violations, fmt.Sprintf("Deployment %s rolled out %d times for slot %s (generation %d)", d.Name, c, slot, d.Generation))
	}
	if last := r.lastSlot[d.Name]; slot < last {
		r.violations = append(r.violations, fmt.Sprintf("Deployment %s rolled out for slot %s after slot %s", d.Name, slot, last))
	}
	r.lastSlot[d.Name] = max(r.lastSlot[d.Name], slot)
}

// Total is how many rollouts the Deployment name has made so far.
func (r *rollouts) Total(name string) int { r.mu.Lock(); defer r.mu.Unlock(); return r.total[name] }
