package main

// Item 5's bursts: n WebServers created at once, or the same Deployments and
// Services written by a plain client, timed until all of them are current.

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/webserver"
)

const revEnv = "BENCH_REV"

// burstRounds: the burst runs A B B A ..., burstRounds times per variant,
// each in a fresh namespace.
const burstRounds = 2

const (
	burstPlain    = "plain client"
	burstDeckhand = "Deckhand"
)

// burstRun is one burst of n WebServers (or of their Deployments and
// Services by a plain client) in a namespace of its own.
type burstRun struct {
	Variant     string  `json:"variant"`
	Round       int     `json:"round"`
	Namespace   string  `json:"namespace"`
	CreatedSecs float64 `json:"createdSeconds"`
	Seconds     float64 `json:"allCurrentSeconds"`
	Cost        cost    `json:"cost"`
	// SeenMs is, per Deployment, when the bench's informer first saw it
	// (after the burst's start); AvailableMs from then until it saw it
	// Available: the creator's part and kube-controller-manager's part.
	SeenMs      []float64 `json:"deploymentSeenMs"`
	AvailableMs []float64 `json:"seenToAvailableMs"`
}

// burstTimeline records through an informer when each Deployment of a
// namespace is first seen and first seen Available.
type burstTimeline struct {
	mu              sync.Mutex
	seen, available map[string]time.Time
	*deploymentWatch
}

func trackBurst(ctx context.Context, e *env, ns string) (*burstTimeline, error) {
	t := &burstTimeline{seen: map[string]time.Time{}, available: map[string]time.Time{}}
	record := func(o any) {
		d, ok := o.(*appsv1.Deployment)
		if !ok {
			return
		}
		now := time.Now()
		t.mu.Lock()
		defer t.mu.Unlock()
		if _, ok := t.seen[d.Name]; !ok {
			t.seen[d.Name] = now
		}
		if _, ok := t.available[d.Name]; !ok && deploymentCondition(d, appsv1.DeploymentAvailable) {
			t.available[d.Name] = now
		}
	}
	var err error
	if t.deploymentWatch, err = watchDeployments(ctx, e, ns, toolscache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, o any) { record(o) }}); err != nil {
		return nil, err
	}
	return t, nil
}

// durations returns, in milliseconds, each Deployment's first sighting
// after start and the time from then until it was Available.
func (t *burstTimeline) durations(start time.Time) (seen, available []float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, at := range t.seen {
		seen = append(seen, msFloat(at.Sub(start)))
		if av, ok := t.available[name]; ok {
			available = append(available, msFloat(av.Sub(at)))
		}
	}
	return seen, available
}

// runBurst creates n WebServers (Deckhand) or their Deployments and Services
// (plain client) with webserver.Workers workers in ns, and waits until every Deployment is
// Available (and, for Deckhand, every WebServer's status is current).
func runBurst(ctx context.Context, e *env, variant, ns string, n int) (*burstRun, error) {
	run := &burstRun{Variant: variant, Namespace: ns}
	if err := e.namespace(ctx, ns); err != nil {
		return nil, err
	}
	s0, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	tl, err := trackBurst(ctx, e, ns)
	if err != nil {
		return nil, err
	}
	defer tl.close()
	start := time.Now()
	err = runWorkers(n, webserver.Workers, func(i int) error {
		name, rev := fmt.Sprintf("ws-%04d", i), fmt.Sprintf("init-%d", i)
		if variant == burstPlain {
			if err := e.c.Create(ctx, plainDeployment(ns, name, rev)); err != nil {
				return err
			}
			return e.c.Create(ctx, plainService(ns, name))
		}
		return e.c.Create(ctx, &deckhandv1alpha1.WebServer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: deckhandv1alpha1.WebServerSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](0),
				Env: []corev1.EnvVar{{Name: revEnv, Value: rev}}}})
	})
	if err != nil {
		return nil, err
	}
	run.CreatedSecs = time.Since(start).Seconds()
	err = waitAvailable(ctx, func(ctx context.Context) (bool, string) {
		ok, state := deploymentsAvailable(e, ns, n)(ctx)
		if variant == burstPlain {
			return ok, state
		}
		var wl deckhandv1alpha1.WebServerList
		if e.c.List(ctx, &wl, client.InNamespace(ns)) != nil {
			return false, state
		}
		current := 0
		for _, w := range wl.Items {
			if w.Status.ObservedGeneration == w.Generation && apimeta.IsStatusConditionTrue(w.Status.Conditions, deckhandv1alpha1.WebServerAvailableCondition) {
				current++
			}
		}
		return ok && current == n, fmt.Sprintf("%s, %d/%d WebServer statuses current", state, current, n)
	})
	if err != nil {
		return nil, fmt.Errorf("%s burst in %s: %w", variant, ns, err)
	}
	run.Seconds = time.Since(start).Seconds()
	settle()
	s1, err := e.scrape(ctx)
	if err != nil {
		return nil, err
	}
	run.Cost = diff(s0, s1)
	run.SeenMs, run.AvailableMs = tl.durations(start)
	logf("[webserver] %s burst of %d in %s: created in %.2f s, all current after %.2f s", variant, n, ns, run.CreatedSecs, run.Seconds)
	return run, nil
}

// plainDeployment and plainService are what a WebServer's controller
// creates, written by hand for the plain-client baseline.
func plainDeployment(ns, name, rev string) *appsv1.Deployment {
	lbl := map[string]string{"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "web", Image: "nginx:1.27", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
					Env: []corev1.EnvVar{{Name: revEnv, Value: rev}},
				}}},
			},
		},
	}
}

func plainService(ns, name string) *corev1.Service {
	lbl := map[string]string{"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": name}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl},
		Spec:       corev1.ServiceSpec{Selector: lbl, Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
}
