package main

// Item 5's churn: spec changes at a steady rate, each timed until its value
// shows in a Deployment's template.

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
)

// revTracker records when each BENCH_REV value first shows up in the
// template of a Deployment of one namespace (through an informer).
type revTracker struct {
	mu      sync.Mutex
	seen    map[string]time.Time
	factory informers.SharedInformerFactory
	stop    chan struct{}
}

func trackRevisions(e *env, ns string) (*revTracker, error) {
	t := &revTracker{seen: map[string]time.Time{}, stop: make(chan struct{}),
		factory: informers.NewSharedInformerFactoryWithOptions(e.cs, 0, informers.WithNamespace(ns))}
	record := func(obj any) {
		now := time.Now()
		d, ok := obj.(*appsv1.Deployment)
		if !ok {
			return
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, ev := range c.Env {
				if ev.Name == revEnv {
					t.mu.Lock()
					if _, ok := t.seen[ev.Value]; !ok {
						t.seen[ev.Value] = now
					}
					t.mu.Unlock()
				}
			}
		}
	}
	if _, err := t.factory.Apps().V1().Deployments().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, o any) { record(o) },
	}); err != nil {
		return nil, err
	}
	t.factory.Start(t.stop)
	return t, nil
}

func (t *revTracker) close() { close(t.stop); t.factory.Shutdown() }

// churnResult is one churn phase: latency from each change sent to its
// value seen in a Deployment template.
type churnResult struct {
	lat              latencies
	sent, errs, lost int
}

// fields is c for the raw results' JSON: every latency in milliseconds.
func (c churnResult) fields() map[string]any {
	return map[string]any{"sent": c.sent, "failed": c.errs, "neverSeen": c.lost, "latencyMs": c.lat}
}

// runChurn sends one change every 100 ms for d, round robin over n objects
// (patch(name, rev) sends it), and waits up to 30 s for every change to show.
func runChurn(ctx context.Context, t *revTracker, n int, d time.Duration, prefix string, patch func(ctx context.Context, name, rev string) error) churnResult {
	sent := map[string]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var res churnResult
	tick := time.NewTicker(100 * time.Millisecond)
	for k := range int(d / (100 * time.Millisecond)) {
		<-tick.C
		rev := fmt.Sprintf("%s-%d", prefix, k)
		name := fmt.Sprintf("ws-%04d", k%n)
		wg.Go(func() {
			start := time.Now()
			err := patch(ctx, name, rev)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.errs++
				return
			}
			sent[rev] = start
		})
	}
	tick.Stop()
	wg.Wait()
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		for rev := range sent {
			if _, ok := t.seen[rev]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	res.sent = len(sent)
	for rev, at := range sent {
		if s, ok := t.seen[rev]; ok {
			res.lat = append(res.lat, s.Sub(at))
		} else {
			res.lost++
		}
	}
	return res
}
