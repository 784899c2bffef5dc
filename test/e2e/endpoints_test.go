package e2e

// In-place updates as a Service sees them: kube-controller-manager's
// EndpointSlice controller, fed by the fake nodes' Ready conditions,
// decides when a pod receives traffic, and the test follows its
// EndpointSlices and the pods event by event.

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inplacegate"
	"github.com/deckhand-dev/deckhand/internal/podutil"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// trafficEvent is one event of a trafficRecord: a pod's or an
// EndpointSlice's new state, at the resourceVersion the API server stored
// it with.
type trafficEvent struct {
	rv    int64
	at    time.Time
	pod   *corev1.Pod
	slice *discoveryv1.EndpointSlice
	gone  bool
}

// trafficRecord records every event of the pods of a namespace and of the
// EndpointSlices of one Service in it. Both kinds live in the cluster's one
// etcd, whose revision is every object's resourceVersion here, so ordering
// the events by resourceVersion orders them as they were stored, whichever
// watch delivered them first.
type trafficRecord struct {
	mu     sync.Mutex
	events []trafficEvent
}

func (r *trafficRecord) add(t *testing.T, obj runtime.Object, gone bool) {
	ev := trafficEvent{at: time.Now(), gone: gone}
	var rv string
	switch o := obj.(type) {
	case *corev1.Pod:
		ev.pod, rv = o, o.ResourceVersion
	case *discoveryv1.EndpointSlice:
		ev.slice, rv = o, o.ResourceVersion
	default:
		return
	}
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil {
		t.Errorf("resourceVersion %q is not the etcd revision this test orders by: %v", rv, err)
		return
	}
	ev.rv = n
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

// recordTraffic starts recording the pods of ns and the EndpointSlices of
// Service svc from now on; the returned stop ends both watches.
func recordTraffic(t *testing.T, ns, svc string) (*trafficRecord, func()) {
	t.Helper()
	rec := &trafficRecord{}
	sliceAPI := suite.clientset.DiscoveryV1().EndpointSlices(ns)
	sliceOpts := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc}
	ctx, cancel := context.WithCancel(context.Background())
	list, err := sliceAPI.List(ctx, sliceOpts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	for i := range list.Items {
		rec.add(t, &list.Items[i], false)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = sliceOpts.LabelSelector
			return sliceAPI.Watch(ctx, o)
		},
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			rec.add(t, ev.Object, ev.Type == watch.Deleted)
		}
	}()
	stopPods := testutil.WatchPods(t, suite.clientset, ns, func(p *corev1.Pod) { rec.add(t, p, false) },
		func(ev watch.EventType, p *corev1.Pod) { rec.add(t, p, ev == watch.Deleted) })
	return rec, func() { stopPods(); cancel(); w.Stop(); <-done }
}

// endpointReady is whether pod uid is a ready endpoint of the slices.
func endpointReady(current map[string]*discoveryv1.EndpointSlice, uid types.UID) bool {
	for _, s := range current {
		for _, e := range s.Endpoints {
			if e.TargetRef != nil && e.TargetRef.UID == uid {
				return e.Conditions.Ready == nil || *e.Conditions.Ready
			}
		}
	}
	return false
}

// restarted is whether container statuses show a container other than the
// one running in before: stopped, started again, or on another image.
func restarted(before, now []corev1.ContainerStatus) bool {
	for _, b := range before {
		for _, n := range now {
			if n.Name != b.Name {
				continue
			}
			if n.State.Running == nil || b.State.Running == nil || !n.State.Running.StartedAt.Equal(&b.State.Running.StartedAt) ||
				n.RestartCount != b.RestartCount || n.Image != b.Image || n.ImageID != b.ImageID || n.ContainerID != b.ContainerID {
				return true
			}
		}
	}
	return false
}

// podPassage is what a trafficRecord shows of one pod's in-place update.
type podPassage struct {
	// out is the first EndpointSlice event without the pod as a ready
	// endpoint; restart the first pod event showing its container
	// restarted; back the first EndpointSlice event after the restart with
	// the pod a ready endpoint again. 0 when not seen.
	out, restart, back int64
	// gateClosed is when the pod was first seen with the gate False, and
	// outAt when the event out arrived: outAt-gateClosed is how long the
	// EndpointSlice controller took.
	gateClosed, outAt time.Time
	history           []string
}

// passages replays the record in resourceVersion order for each pod in
// before (the pods as they ran before the update).
func (r *trafficRecord) passages(before []corev1.Pod) map[types.UID]*podPassage {
	r.mu.Lock()
	events := append([]trafficEvent(nil), r.events...)
	r.mu.Unlock()
	slices.SortStableFunc(events, func(a, b trafficEvent) int { return cmp.Compare(a.rv, b.rv) })
	out := map[types.UID]*podPassage{}
	base := map[types.UID][]corev1.ContainerStatus{}
	for i := range before {
		out[before[i].UID] = &podPassage{}
		base[before[i].UID] = before[i].Status.ContainerStatuses
	}
	current := map[string]*discoveryv1.EndpointSlice{}
	for _, ev := range events {
		if ev.pod != nil {
			pp, ok := out[ev.pod.UID]
			if !ok {
				continue
			}
			gate := "none"
			if c := inplacegate.Condition(ev.pod); c != nil {
				gate = string(c.Status)
				if c.Status == corev1.ConditionFalse && pp.gateClosed.IsZero() {
					pp.gateClosed = ev.at
				}
			}
			if pp.restart == 0 && restarted(base[ev.pod.UID], ev.pod.Status.ContainerStatuses) {
				pp.restart = ev.rv
			}
			pp.history = append(pp.history, fmt.Sprintf("rv %d pod: gate %s, ready %v, restarted %v", ev.rv, gate, podutil.IsPodReady(ev.pod), pp.restart != 0))
			continue
		}
		if ev.gone {
			delete(current, ev.slice.Name)
		} else {
			current[ev.slice.Name] = ev.slice
		}
		for uid, pp := range out {
			ready := endpointReady(current, uid)
			pp.history = append(pp.history, fmt.Sprintf("rv %d EndpointSlice: endpoint ready %v", ev.rv, ready))
			switch {
			case !ready && pp.out == 0:
				pp.out, pp.outAt = ev.rv, ev.at
			case ready && pp.restart != 0 && pp.back == 0:
				pp.back = ev.rv
			}
		}
	}
	return out
}

// serviceFor creates a Service "web" in ns selecting labels and waits until
// its EndpointSlices list n ready endpoints.
func serviceFor(t *testing.T, ns string, labels map[string]string, n int) string {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	create(t, svc)
	waitReadyEndpoints(t, ns, svc.Name, n)
	return svc.Name
}

// waitReadyEndpoints waits until the EndpointSlices of Service svc list n
// ready endpoints.
func waitReadyEndpoints(t *testing.T, ns, svc string, n int) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func(ctx context.Context) (bool, error) {
		var list discoveryv1.EndpointSliceList
		if err := suite.client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc}); err != nil {
			return false, err
		}
		ready := 0
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready != nil && *e.Conditions.Ready {
					ready++
				}
			}
		}
		return ready == n, nil
	}, "Service %s/%s has %d ready endpoints", ns, svc, n)
}

// checkPassages requires of every pod in before that the record shows it
// leave the Service's ready endpoints before its container restarted, and
// come back after; it logs how long the EndpointSlice controller took from
// the gate's closing to the pod's leaving.
func checkPassages(t *testing.T, rec *trafficRecord, before []corev1.Pod) {
	t.Helper()
	for uid, pp := range rec.passages(before) {
		history := strings.Join(pp.history, "\n  ")
		switch {
		case pp.restart == 0:
			t.Errorf("pod %s: no container restart seen:\n  %s", uid, history)
		case pp.out == 0 || pp.out > pp.restart:
			t.Errorf("pod %s: its container restarted (rv %d) while it was a ready endpoint (left at rv %d):\n  %s", uid, pp.restart, pp.out, history)
		case pp.back == 0:
			t.Errorf("pod %s: not a ready endpoint again after its restart:\n  %s", uid, history)
		default:
			t.Logf("pod %s: left the endpoints at rv %d, %s after its gate closed; restarted at rv %d; back at rv %d",
				uid, pp.out, pp.outAt.Sub(pp.gateClosed).Round(time.Millisecond), pp.restart, pp.back)
		}
	}
}

// updateBehindService records the EndpointSlices of Service svc and the
// pods of ns while update changes the image of their container called
// container to image; waits until the pods labelled labels are before's
// (updated in place, not recreated), each Ready and running image, and svc
// lists them ready again; and checks each pod's passage (checkPassages).
func updateBehindService(t *testing.T, ns, svc string, labels map[string]string, before []corev1.Pod, container, image string, update func()) {
	t.Helper()
	rec, stop := recordTraffic(t, ns, svc)
	defer stop()
	update()
	testutil.Eventually(t, 90*time.Second, func(ctx context.Context) (bool, error) {
		pods, err := testutil.LivePods(ctx, suite.client, ns, labels)
		if err != nil || len(pods) != len(before) {
			return false, err
		}
		for i := range pods {
			if !slices.ContainsFunc(before, func(b corev1.Pod) bool { return b.UID == pods[i].UID }) {
				return false, fmt.Errorf("pod %s is not one of the pods before the update: it was recreated, not updated in place", pods[i].Name)
			}
			cs := podutil.FindStatus(pods[i].Status.ContainerStatuses, container)
			if !podutil.IsPodReady(&pods[i]) || cs == nil || cs.Image != image {
				return false, nil
			}
		}
		return true, nil
	}, "every pod Ready with %s on %s", container, image)
	waitReadyEndpoints(t, ns, svc, len(before))
	rec.catchUp(t, ns, svc)
	stop()
	checkPassages(t, rec, before)
}

// catchUp waits until the record holds every EndpointSlice of Service svc
// at the version the API server now serves: a watch delivers an event
// after a read can already see its object, and stopping the record before
// the last event came would make a pod's return look missing.
func (r *trafficRecord) catchUp(t *testing.T, ns, svc string) {
	t.Helper()
	list, err := suite.clientset.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for i := range list.Items {
			want, err := strconv.ParseInt(list.Items[i].ResourceVersion, 10, 64)
			if err != nil {
				return false, err
			}
			if !slices.ContainsFunc(r.events, func(ev trafficEvent) bool {
				return ev.slice != nil && ev.slice.Name == list.Items[i].Name && ev.rv >= want
			}) {
				return false, nil
			}
		}
		return true, nil
	}, "the record holds the EndpointSlices of %s/%s as now served", ns, svc)
}

// TestInPlaceUpdateLeavesEndpointsFirst changes the image of a PodSet of 2
// pods behind a Service, with the default grace period, and follows the
// Service's EndpointSlices and the pods event by event: each pod leaves
// the ready endpoints (the EndpointSlice controller's response to the
// in-place update gate) before its container is seen restarting, and is a
// ready endpoint again after; both pods end on the new image, in place.
func TestInPlaceUpdateLeavesEndpointsFirst(t *testing.T) {
	const replicas = 2
	ns := namespace(t)
	labels := map[string]string{"app": "web-" + ns}
	ps := testutil.PodSet(ns, "web", replicas, labels, pauseContainer)
	create(t, ps)
	before := waitReadyPods(t, ns, replicas, labels)
	svc := serviceFor(t, ns, labels, replicas)
	updateBehindService(t, ns, svc, labels, before, pauseContainer.Name, "registry.k8s.io/pause:3.9", func() {
		testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
			if err := suite.client.Get(ctx, client.ObjectKeyFromObject(ps), ps); err != nil {
				return false, err
			}
			ps.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/pause:3.9"
			if err := suite.client.Update(ctx, ps); apierrors.IsConflict(err) {
				return false, nil
			} else if err != nil {
				return false, err
			}
			return true, nil
		}, "PodSet %s updated", ps.Name)
	})
}

// TestSidecarInPlaceUpdateLeavesEndpointsFirst does the same for a
// Deployment's 2 pods into which a SidecarSet injected a sidecar, changing
// the sidecar's image: the injected readiness gate takes each pod out of
// the endpoints before the sidecar restarts.
func TestSidecarInPlaceUpdateLeavesEndpointsFirst(t *testing.T) {
	const replicas = 2
	ns := namespace(t)
	labels := map[string]string{"app": "mesh-" + ns}
	ss := sidecarSetFor(ns, labels, deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: "proxy", Image: "registry.example/proxy:1"}})
	createObservedSidecarSet(t, ss)
	before := readyDeployment(t, ns, replicas, labels)
	svc := serviceFor(t, ns, labels, replicas)
	updateBehindService(t, ns, svc, labels, before, "proxy", "registry.example/proxy:2", func() {
		updateSidecarSet(t, ss, func(s *deckhandv1alpha1.SidecarSet) { s.Spec.Containers[0].Image = "registry.example/proxy:2" })
	})
}
