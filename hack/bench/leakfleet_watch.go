package main

// What the leakfleet item observes on its own: every pod of the fleet
// through a pod informer (created, deletion first seen), every working-set
// sample through metrics.k8s.io, and at the end the RestartSchedules'
// Events.

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

// fleetSample is one working-set sample: t in seconds since day 0 started
// (metrics-server's scrape time), bytes of the container "app".
type fleetSample struct {
	T     float64 `json:"t"`
	Bytes int64   `json:"bytes"`
}

// fleetPod is one pod of the fleet as the bench saw it.
type fleetPod struct {
	Name     string `json:"pod"`
	Workload string `json:"workload"`
	// Created and Deleted are seconds since day 0 started; Deleted is when
	// the informer first saw the pod terminating or gone (absent: it
	// lived to the end).
	Created float64       `json:"created"`
	Deleted *float64      `json:"deleted,omitempty"`
	Memory  []fleetSample `json:"memory"`
}

// fleetRestart is a pod deletion seen in [day 0, end): t in seconds since
// day 0 started, the reason the RestartSchedule's Events give for it
// (PodEvicted, UrgentRestart) or "rollout" for a pod its Deployment's
// rollout replaced, and the Event's message for an urgent one.
type fleetRestart struct {
	T       float64 `json:"t"`
	Pod     string  `json:"pod"`
	Reason  string  `json:"reason"`
	Message string  `json:"message,omitempty"`
}

// fleetPolicyResult is one policy's raw observations.
type fleetPolicyResult struct {
	Policy   fleetPolicy    `json:"policy"`
	Pods     []*fleetPod    `json:"pods"`
	Restarts []fleetRestart `json:"restarts"`
}

// fleetResult is the item's raw result: the plan, the clock, and per
// policy every pod's working-set series and every restart.
type fleetResult struct {
	Plan fleetPlan `json:"plan"`
	// Start is day 0's start on the wall clock; Windows the nights'
	// windows, [open, close) in seconds since Start.
	Start    time.Time            `json:"start"`
	Windows  [][2]float64         `json:"windowsSeconds"`
	Policies []*fleetPolicyResult `json:"policies"`
	Samples  int                  `json:"podMetricsLists"`
	// DataMissing is the manager's trigger_data_missing_total by reason
	// at the end: only the need policy has a memory trigger.
	DataMissing map[string]float64 `json:"triggerDataMissingTotal"`
	byPolicy    map[fleetPolicy]*fleetPolicyResult
	clock       fleetClock
}

// fleetObserver records the fleet's pods and samples while the item runs.
type fleetObserver struct {
	mu      sync.Mutex
	pods    map[string]*fleetPod // namespace/name
	deleted map[string]time.Time
	created map[string]time.Time
	samples map[string][]fleetSampleAt
	lists   int
	stop    chan struct{}
	done    chan struct{}
	factory informers.SharedInformerFactory
}

type fleetSampleAt struct {
	at    time.Time
	bytes int64
}

func fleetPolicyOf(ns string) (fleetPolicy, bool) {
	p, ok := strings.CutPrefix(ns, "leakfleet-")
	return fleetPolicy(p), ok
}

// watchFleet starts the pod informer and the sampler; the sampler lists
// every PodMetrics of the cluster once per half resolution of
// metrics-server, keeping each pod's sample once per scrape time.
func watchFleet(ctx context.Context, e *env, plan fleetPlan) (*fleetObserver, error) {
	o := &fleetObserver{pods: map[string]*fleetPod{}, deleted: map[string]time.Time{}, created: map[string]time.Time{},
		samples: map[string][]fleetSampleAt{}, stop: make(chan struct{}), done: make(chan struct{})}
	o.factory = informers.NewSharedInformerFactory(e.cs, 0)
	inf := o.factory.Core().V1().Pods().Informer()
	seen := func(obj any, gone bool) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if _, ok := fleetPolicyOf(p.Namespace); !ok {
			return
		}
		now := time.Now()
		key := p.Namespace + "/" + p.Name
		o.mu.Lock()
		defer o.mu.Unlock()
		if _, ok := o.pods[key]; !ok {
			o.pods[key] = &fleetPod{Name: p.Name, Workload: p.Labels["app"]}
			o.created[key] = p.CreationTimestamp.Time
		}
		if _, ok := o.deleted[key]; !ok && (gone || p.DeletionTimestamp != nil) {
			o.deleted[key] = now
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { seen(obj, false) },
		UpdateFunc: func(_, obj any) { seen(obj, false) },
		DeleteFunc: func(obj any) { seen(obj, true) },
	}); err != nil {
		return nil, err
	}
	o.factory.Start(o.stop)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		o.close()
		return nil, errors.New("pod informer did not sync")
	}
	mc, err := metricsclient.NewForConfig(e.cluster.Config)
	if err != nil {
		o.close()
		return nil, err
	}
	go func() {
		defer close(o.done)
		wait.Until(func() { o.sample(ctx, mc) }, localcluster.MetricsServerResolution/2, o.stop)
	}()
	return o, nil
}

// sample lists every PodMetrics and keeps each fleet pod's working set
// once per scrape time.
func (o *fleetObserver) sample(ctx context.Context, mc metricsclient.Interface) {
	list, err := mc.MetricsV1beta1().PodMetricses("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return // metrics-server's first scrape is not in yet
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lists++
	for _, pm := range list.Items {
		if _, ok := fleetPolicyOf(pm.Namespace); !ok {
			continue
		}
		for _, c := range pm.Containers {
			if c.Name != "app" {
				continue
			}
			key := pm.Namespace + "/" + pm.Name
			s := o.samples[key]
			if n := len(s); n == 0 || s[n-1].at.Before(pm.Timestamp.Time) {
				o.samples[key] = append(s, fleetSampleAt{pm.Timestamp.Time, c.Usage.Memory().Value()})
			}
		}
	}
}

func (o *fleetObserver) close() {
	select {
	case <-o.stop:
	default:
		close(o.stop)
		o.factory.Shutdown()
	}
}

// result stops the observation and returns what it saw, with each
// restart's reason from the RestartSchedules' Events.
func (o *fleetObserver) result(ctx context.Context, e *env, clk fleetClock) (*fleetResult, error) {
	o.close()
	<-o.done
	reasons, err := fleetEvictionEvents(ctx, e)
	if err != nil {
		return nil, err
	}
	m, err := e.managerMetrics(ctx)
	if err != nil {
		return nil, err
	}
	since := func(t time.Time) float64 { return t.Sub(clk.start).Seconds() }
	res := &fleetResult{Plan: clk.plan, Start: clk.start.UTC(), clock: clk, byPolicy: map[fleetPolicy]*fleetPolicyResult{},
		DataMissing: m.sumBy("deckhand_restartschedule_trigger_data_missing_total", "reason")}
	for _, w := range clk.windows() {
		res.Windows = append(res.Windows, [2]float64{since(w[0]), since(w[1])})
	}
	for _, p := range fleetPolicies {
		pr := &fleetPolicyResult{Policy: p}
		res.Policies = append(res.Policies, pr)
		res.byPolicy[p] = pr
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	res.Samples = o.lists
	for _, key := range slices.Sorted(maps.Keys(o.pods)) {
		ns, _, _ := strings.Cut(key, "/")
		policy, _ := fleetPolicyOf(ns)
		pod := o.pods[key]
		pod.Created = since(o.created[key])
		for _, s := range o.samples[key] {
			pod.Memory = append(pod.Memory, fleetSample{T: round1(since(s.at)), Bytes: s.bytes})
		}
		pr := res.byPolicy[policy]
		pr.Pods = append(pr.Pods, pod)
		d, ok := o.deleted[key]
		if !ok {
			continue
		}
		t := since(d)
		pod.Deleted = &t
		if d.Before(clk.start) || !d.Before(clk.end()) {
			continue
		}
		rs := fleetRestart{T: round1(t), Pod: pod.Name, Reason: "rollout"}
		if ev, ok := reasons[key]; ok {
			rs.Reason, rs.Message = ev.Reason, ev.Note
		}
		pr.Restarts = append(pr.Restarts, rs)
	}
	for _, pr := range res.Policies {
		slices.SortFunc(pr.Restarts, func(a, b fleetRestart) int { return cmp.Compare(a.T, b.T) })
	}
	return res, nil
}

func round1(x float64) float64 { return float64(int64(x*10+0.5)) / 10 }

// fleetEvictionEvents are the RestartSchedules' eviction Events by the pod
// they name (namespace/name): UrgentRestart over PodEvicted, since an
// urgent eviction has both.
func fleetEvictionEvents(ctx context.Context, e *env) (map[string]eventsv1.Event, error) {
	out := map[string]eventsv1.Event{}
	for _, p := range fleetPolicies {
		var list eventsv1.EventList
		if err := e.c.List(ctx, &list, client.InNamespace(fleetNamespace(p))); err != nil {
			return nil, err
		}
		for _, ev := range list.Items {
			if ev.Regarding.Kind != "RestartSchedule" || (ev.Reason != restartschedule.ReasonPodEvicted && ev.Reason != restartschedule.ReasonUrgentRestart) {
				continue
			}
			// The message names the pod first: "evicted <pod> of ...".
			f := strings.Fields(ev.Note)
			if len(f) < 2 {
				continue
			}
			key := ev.Namespace + "/" + f[1]
			if prev, ok := out[key]; ok && prev.Reason == restartschedule.ReasonUrgentRestart {
				continue
			}
			out[key] = ev
		}
	}
	return out, nil
}
