package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/deckhand-dev/deckhand/internal/podutil"
)

// podTracker follows the pods of one namespace through an informer.
type podTracker struct {
	mu   sync.Mutex
	pods map[string]bool // name -> Ready
	// ready counts the true values of pods, kept as they change: the waits
	// poll counts() every 20 ms, and a walk of the map at each poll cost
	// the benchmark's own client 7.5 million map reads a second at 150,000
	// pods, on the 2 CPUs the cluster under test needs.
	ready int
	// last is when the informer last delivered a pod event.
	last    time.Time
	stop    chan struct{}
	factory informers.SharedInformerFactory
}

func trackPods(ctx context.Context, cs kubernetes.Interface, ns string) (*podTracker, error) {
	return trackPodsWith(ctx, cs, ns, nil)
}

// trackPodsWith is trackPods counting as "ready" the pods done reports true
// for instead of the Ready ones (nil: Ready).
func trackPodsWith(ctx context.Context, cs kubernetes.Interface, ns string, done func(*corev1.Pod) bool) (*podTracker, error) {
	if done == nil {
		done = podutil.IsPodReady
	}
	t := &podTracker{pods: map[string]bool{}, stop: make(chan struct{})}
	t.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := t.factory.Core().V1().Pods().Informer()
	set := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		t.set(p.Name, done(p))
	}
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, n any) { set(n) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				t.remove(p.Name)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	t.factory.Start(t.stop)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		close(t.stop)
		return nil, fmt.Errorf("pod informer for %s did not sync", ns)
	}
	return t, nil
}

// set records a pod's readiness as the informer last delivered it.
func (t *podTracker) set(name string, ready bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if was, ok := t.pods[name]; ok && was {
		t.ready--
	}
	if ready {
		t.ready++
	}
	t.pods[name] = ready
	t.last = time.Now()
}

// remove forgets a deleted pod.
func (t *podTracker) remove(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if was, ok := t.pods[name]; ok {
		if was {
			t.ready--
		}
		delete(t.pods, name)
	}
	t.last = time.Now()
}

func (t *podTracker) counts() (total, ready int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pods), t.ready
}

// waitFor polls the counts until cond holds and returns the time since start.
func (t *podTracker) waitFor(ctx context.Context, start time.Time, timeout time.Duration, what string, cond func(total, ready int) bool) (time.Duration, error) {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(t.counts()), nil
	})
	if err != nil {
		total, ready := t.counts()
		return 0, fmt.Errorf("waiting for %s: %w (pods %d, ready %d)", what, err, total, ready)
	}
	return time.Since(start), nil
}

// podsQuietFor is how long no pod may change, and the machine stay below
// quietMachineCPU, before a measurement that wants a quiet cluster begins.
const podsQuietFor = 5 * time.Second

// quietMachineCPU is the busy time of the whole machine, in CPUs, under
// which it counts as quiet: a quarter of this 2-CPU machine. With 50,000
// pods on 500 nodes and nothing to do, top showed etcd, kube-apiserver and
// kwok using 0.1 to 0.3 CPU together; while kwok caught up, 1.5 to 2.
const quietMachineCPU = 0.5

// waitQuiet waits until no pod of the namespace has changed for
// podsQuietFor and the machine was quiet over that time, and returns how
// long that took and the machine's busy CPUs over the last podsQuietFor.
// A pod is Ready before kwok has written all of its status
// (the resources its containers run with come after): at 50,000 pods kwok
// and kube-apiserver went on using most of the machine for over a minute
// after the last pod turned Ready, at times without a pod event for
// several seconds, and figures taken then measured that backlog, not the
// pod count.
func (t *podTracker) waitQuiet(ctx context.Context, timeout time.Duration) (took time.Duration, cpus float64, err error) {
	start := time.Now()
	type sample struct {
		at   time.Time
		busy time.Duration
	}
	var window []sample
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(context.Context) (bool, error) {
		busy, err := machineBusy()
		if err != nil {
			return false, err
		}
		now := time.Now()
		window = append(window, sample{now, busy})
		for len(window) > 1 && now.Sub(window[1].at) >= podsQuietFor {
			window = window[1:]
		}
		t.mu.Lock()
		since := time.Since(t.last)
		t.mu.Unlock()
		first := window[0]
		span := now.Sub(first.at)
		if since < podsQuietFor || span < podsQuietFor {
			return false, nil
		}
		cpus = (busy - first.busy).Seconds() / span.Seconds()
		return cpus < quietMachineCPU, nil
	})
	if err != nil {
		return 0, cpus, fmt.Errorf("waiting for the pods to stop changing and the machine to go quiet (%s; last %.2f CPUs busy): %w", podsQuietFor, cpus, err)
	}
	return time.Since(start), cpus, nil
}

func (t *podTracker) close() { close(t.stop); t.factory.Shutdown() }

// runWorkers runs fn(i) for i in [0,n) on w goroutines and returns the
// first error.
func runWorkers(n, w int, fn func(i int) error) error {
	ch := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range ch {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		ch <- i
	}
	close(ch)
	wg.Wait()
	return first
}

// deploymentWatch is a Deployment informer on one namespace.
type deploymentWatch struct {
	factory informers.SharedInformerFactory
	stop    chan struct{}
}

// watchDeployments starts an informer on the Deployments of ns that calls h,
// and waits until it has synced.
func watchDeployments(ctx context.Context, e *env, ns string, h toolscache.ResourceEventHandler) (*deploymentWatch, error) {
	w := &deploymentWatch{stop: make(chan struct{}), factory: informers.NewSharedInformerFactoryWithOptions(e.cs, 0, informers.WithNamespace(ns))}
	inf := w.factory.Apps().V1().Deployments().Informer()
	if _, err := inf.AddEventHandler(h); err != nil {
		return nil, err
	}
	w.factory.Start(w.stop)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		w.close()
		return nil, fmt.Errorf("deployment informer for %s did not sync", ns)
	}
	return w, nil
}

func (w *deploymentWatch) close() { close(w.stop); w.factory.Shutdown() }
