package main

// Item 9's cost at scale: the manager with n pods, without and then with a
// RestartSchedule whose memory trigger watches all of them. The cluster is
// etcd, kube-apiserver, kwok and metrics-server only: the pods are created
// bound to a node, controlled by StatefulSets no controller runs, so the
// figures are the manager's own.

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

const (
	costNS       = "triggercost"
	costPerSet   = 100
	costRSSLimit = 1.20
)

// triggerCostStep is one pod count's figures, without (Off) and with (On)
// the memory trigger, on one manager process.
type triggerCostStep struct {
	Pods  int `json:"pods"`
	Nodes int `json:"nodes"`
	// CreateSecs: creating the pods until all were Ready.
	CreateSecs float64           `json:"createAndReadySeconds"`
	Off        triggerCostSample `json:"withoutTrigger"`
	On         triggerCostSample `json:"withMemoryTrigger"`
	// For is the trigger's for; the On sample starts after For and two
	// resolutions more, so that every pod's series holds what it keeps.
	For time.Duration `json:"for"`
	// MetricsResolution is metrics-server's scrape period.
	MetricsResolution time.Duration `json:"metricsResolution"`
}

// costLargeResolution is metrics-server's scrape period above
// costLargeFrom pods: its own default. At 50,000 pods on 100 kwok nodes,
// kwok on 2 cores computes the nodes' usage more slowly than the 10 s
// resolution of the smaller sizes allows, and metrics-server drops every
// node whose scrape times out.
const (
	costLargeFrom       = 10000
	costLargeResolution = 60 * time.Second
)

// triggerCostSample: the manager's RSS (largest of the samples) and live
// heap, its CPU seconds and the PodMetrics lists the API server served over
// Window.
type triggerCostSample struct {
	RSSBytes  int64   `json:"rssBytes"`
	HeapAlloc float64 `json:"liveHeapBytes"`
	// RSSAnon and RSSFile split the largest RSS sample; RuntimeSplit is
	// the Go runtime's account of its memory then (goMemorySplit).
	RSSAnon       int64         `json:"rssAnonBytes"`
	RSSFile       int64         `json:"rssFileBytes"`
	RuntimeSplit  string        `json:"runtimeSplit"`
	Window        time.Duration `json:"window"`
	CPUSeconds    float64       `json:"managerCPUSeconds"`
	PodMetricList float64       `json:"podMetricsLists"`
}

// triggerCostSizes are the pod counts measured: -triggercost-pods, or 500
// with -quick.
func triggerCostSizes(cfg *config) []int {
	if cfg.quick {
		return []int{500}
	}
	return cfg.costPods
}

func benchTriggerCost(ctx context.Context, cfg *config, r *report) error {
	var steps []*triggerCostStep
	var failed error
	for _, n := range triggerCostSizes(cfg) {
		st, err := runTriggerCost(ctx, cfg, n)
		if err != nil {
			// The sizes measured before are reported all the same.
			failed = fmt.Errorf("%d pods: %w", n, err)
			break
		}
		steps = append(steps, st)
	}
	if len(steps) > 0 {
		r.record("triggercost", steps)
		reportTriggerCost(r, steps)
	}
	return failed
}

func runTriggerCost(ctx context.Context, cfg *config, n int) (*triggerCostStep, error) {
	st := &triggerCostStep{Pods: n, Nodes: max(1, n/500), For: time.Duration(cfg.size(120, 30)) * time.Second}
	// Without Prometheus: only resource metrics are measured here, and its
	// scrapes every second would take kwok CPU the manager's figures need
	// (localcluster.Options.ResourceMetricsOnly).
	opts := localcluster.Options{FakeNodes: st.Nodes, Metrics: true, ResourceMetricsOnly: true}
	st.MetricsResolution = localcluster.MetricsServerResolution
	if n > costLargeFrom {
		st.MetricsResolution = costLargeResolution
		opts.MetricsResolution = costLargeResolution
	}
	e, err := startEnv(ctx, cfg, fmt.Sprintf("triggercost-%d", n), opts, nil)
	if err != nil {
		return nil, err
	}
	defer e.stop()
	if err := e.namespace(ctx, costNS); err != nil {
		return nil, err
	}
	empty, err := measureManager(ctx, cfg, e, fmt.Sprintf("heap-triggercost-empty-%d", n), 0, nil)
	if err != nil {
		return nil, err
	}
	tr, err := trackPods(ctx, e.cs, costNS)
	if err != nil {
		return nil, err
	}
	defer tr.close()
	sets := (n + costPerSet - 1) / costPerSet
	owners := make([]*appsv1.StatefulSet, sets)
	if err := runWorkers(sets, 16, func(i int) error {
		owners[i] = costStatefulSet(i)
		return e.c.Create(ctx, owners[i])
	}); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := runWorkers(n, 32, func(k int) error {
		_, err := e.cs.CoreV1().Pods(costNS).Create(ctx, costPod(owners[k/costPerSet], k%costPerSet, k%st.Nodes), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, fmt.Errorf("creating pods: %w", err)
	}
	if _, err := tr.waitFor(ctx, t0, 60*time.Minute, fmt.Sprintf("%d pods Ready", n), func(_, ready int) bool { return ready >= n }); err != nil {
		return nil, err
	}
	st.CreateSecs = time.Since(t0).Seconds()
	logf("[triggercost] %d pods on %d nodes Ready after %s", n, st.Nodes, secs(time.Since(t0)))
	settle()

	off, err := measureManager(ctx, cfg, e, fmt.Sprintf("heap-triggercost-%d", n), empty.controls, nil)
	if err != nil {
		return nil, err
	}
	st.Off.RSSBytes, st.Off.HeapAlloc, st.Off.RSSAnon, st.Off.RSSFile, st.Off.RuntimeSplit = off.rss, off.heapAlloc, off.rssAnon, off.rssFile, off.runtimeSplit
	window := time.Duration(cfg.size(8, 2)) * restartschedule.DefaultMetricsResolution
	if st.Off.CPUSeconds, st.Off.PodMetricList, err = managerWindow(ctx, e, window); err != nil {
		return nil, err
	}
	st.Off.Window = window

	rs := &deckhandv1alpha1.RestartSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "memory", Namespace: costNS},
		Spec: deckhandv1alpha1.RestartScheduleSpec{
			Target: deckhandv1alpha1.RestartTarget{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{fleetLabel: "cost"}}},
			Triggers: []deckhandv1alpha1.RestartNeedTrigger{{Memory: &deckhandv1alpha1.RestartMemoryTrigger{
				Container: "app", PercentOfLimit: ptr.To[int32](90), For: &metav1.Duration{Duration: st.For}}}},
		},
	}
	// The base the trigger's allocations are read against (pprof -base).
	e.saveProfile(ctx, cfg, "allocs", fmt.Sprintf("heap-triggercost-off-%d-allocs", n))
	if err := e.c.Create(ctx, rs); err != nil {
		return nil, err
	}
	if err := sleepUntil(ctx, time.Now().Add(st.For+2*restartschedule.DefaultMetricsResolution)); err != nil {
		return nil, err
	}
	on := &managerFigures{}
	// Profiles as item 3 takes them, and where the trigger's allocations
	// come from: what RSS holds beyond the live heap was allocated.
	profile := fmt.Sprintf("heap-triggercost-on-%d", n)
	probe := memoryProbe{pid: e.mgr.Pid(), forceGC: e.forceGC, metrics: e.managerMetrics,
		afterRSS: func(ctx context.Context) {
			e.saveProfile(ctx, cfg, "heap", profile+"-last-gc")
			e.saveProfile(ctx, cfg, "allocs", profile+"-allocs")
		}}
	if err := sampleMemory(ctx, cfg, probe, on); err != nil {
		return nil, err
	}
	e.saveProfile(ctx, cfg, "heap?gc=1", profile)
	st.On.RSSBytes, st.On.HeapAlloc, st.On.Window = on.rss, on.heapAlloc, window
	st.On.RSSAnon, st.On.RSSFile, st.On.RuntimeSplit = on.rssAnon, on.rssFile, on.runtimeSplit
	logf("[memory] with the trigger: RSS %.1f MiB (anonymous %.1f, file %.1f), live heap %.1f MiB; at the largest RSS: %s",
		mib(float64(on.rss)), mib(float64(on.rssAnon)), mib(float64(on.rssFile)), mib(on.heapAlloc), on.runtimeSplit)
	if st.On.CPUSeconds, st.On.PodMetricList, err = managerWindow(ctx, e, window); err != nil {
		return nil, err
	}
	// The trigger did read the metrics: a schedule that could not would
	// measure nothing.
	var got deckhandv1alpha1.RestartSchedule
	if err := e.c.Get(ctx, client.ObjectKeyFromObject(rs), &got); err != nil {
		return nil, err
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, deckhandv1alpha1.RestartScheduleMetricsUnavailableCondition); got.Status.ObservedGeneration == 0 || c == nil || c.Status != metav1.ConditionFalse {
		return nil, fmt.Errorf("the memory trigger did not read every pod's metrics: %+v", got.Status.Conditions)
	}
	logf("[triggercost] %d pods: RSS %.1f -> %.1f MiB, live heap %.1f -> %.1f MiB, CPU %.2f -> %.2f s and PodMetrics lists %.0f -> %.0f over %s",
		n, mib(float64(st.Off.RSSBytes)), mib(float64(st.On.RSSBytes)), mib(st.Off.HeapAlloc), mib(st.On.HeapAlloc),
		st.Off.CPUSeconds, st.On.CPUSeconds, st.Off.PodMetricList, st.On.PodMetricList, window)
	return st, nil
}

// managerWindow is the manager's CPU seconds and the PodMetrics lists
// metrics-server served (its apiserver_request_total of metrics.k8s.io pods,
// LIST: the API server proxies aggregated requests without counting them)
// over window. Nothing but the manager lists PodMetrics in this cluster.
func managerWindow(ctx context.Context, e *env, window time.Duration) (cpu, lists float64, err error) {
	pid := e.mgr.Pid()
	read := func() (time.Duration, float64, error) {
		m, err := metricsServerMetrics(ctx, e)
		if err != nil {
			return 0, 0, err
		}
		c, err := processCPU(pid)
		return c, m.sum("apiserver_request_total", "group", "metrics.k8s.io", "resource", "pods", "verb", "LIST"), err
	}
	c0, l0, err := read()
	if err != nil {
		return 0, 0, err
	}
	if err := sleepUntil(ctx, time.Now().Add(window)); err != nil {
		return 0, 0, err
	}
	c1, l1, err := read()
	return (c1 - c0).Seconds(), l1 - l0, err
}

// metricsServerMetrics scrapes metrics-server's /metrics as the cluster's
// admin (metrics-server asks the API server who that is and whether it
// may). metrics-server's serving certificate is signed by a CA of its own,
// which the cluster does not export: the connection is to 127.0.0.1.
func metricsServerMetrics(ctx context.Context, e *env) (metrics, error) {
	cfg := rest.CopyConfig(e.cluster.Config)
	cfg.Host = e.cluster.MetricsServerURL
	cfg.TLSClientConfig = rest.TLSClientConfig{Insecure: true}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+"/metrics", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", cfg.Host, resp.Status)
	}
	return parseMetrics(resp.Body), nil
}

func costStatefulSet(i int) *appsv1.StatefulSet {
	app := fmt.Sprintf("cost-%03d", i)
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: costNS, Labels: map[string]string{fleetLabel: "cost"}},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](costPerSet), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			Template: scaleTemplate(app)},
	}
}

// costPod is pod j of StatefulSet s on node kwok-node-<node>: flat at
// 64 MiB of a 256 MiB limit, so that the trigger watches it and never
// evicts it.
func costPod(s *appsv1.StatefulSet, j, node int) *corev1.Pod {
	t := s.Spec.Template
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name + "-" + strconv.Itoa(j), Namespace: costNS, Labels: t.Labels,
			Annotations:     map[string]string{localcluster.SimMemoryWorkingSetAnnotation: "64Mi"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(s, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}},
		Spec: *t.Spec.DeepCopy(),
	}
	p.Spec.NodeName = fmt.Sprintf("kwok-node-%d", node)
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}
	return p
}

func reportTriggerCost(r *report, steps []*triggerCostStep) {
	var b strings.Builder
	b.WriteString("A cluster of its own per pod count (etcd, kube-apiserver, kwok, metrics-server; no controller-manager): the pods, 100 per StatefulSet that nothing runs, " +
		"created bound to kwok nodes (500 pods a node), flat at 64 MiB of a 256 MiB limit. A manager process started once the pods are Ready and measured as item 3 measures it (*without*); " +
		"then a RestartSchedule whose memory trigger (90% of the limit) watches every pod, and, once its `for` and two resolutions have passed (every pod's series then holds what it keeps), " +
		"the same process sampled again (*with*). CPU: the manager's user + system time over the window (/proc); lists: `apiserver_request_total` of `metrics.k8s.io` pods, LIST, over the same window.\n\n")
	fmt.Fprintf(&b, "metrics-server scrapes every %s up to %d pods and every %s (its default) above: kwok cannot compute more pods' usage within %s on this machine.\n\n",
		localcluster.MetricsServerResolution, costLargeFrom, costLargeResolution, localcluster.MetricsServerResolution)
	b.WriteString("| pods | nodes | created and Ready | trigger for | RSS without / with | live heap without / with | manager CPU over the window without / with | PodMetrics lists over the window without / with |\n|---|---|---|---|---|---|---|---|\n")
	for _, s := range steps {
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %.1f / %.1f MiB | %.1f / %.1f MiB | %.2f / %.2f s (%s) | %.0f / %.0f (%s) |\n", s.Pods, s.Nodes, secs(time.Duration(s.CreateSecs*float64(time.Second))), s.For,
			mib(float64(s.Off.RSSBytes)), mib(float64(s.On.RSSBytes)), mib(s.Off.HeapAlloc), mib(s.On.HeapAlloc), s.Off.CPUSeconds, s.On.CPUSeconds, s.On.Window,
			s.Off.PodMetricList, s.On.PodMetricList, s.On.Window)
	}
	r.section("9b. Restart on need: the cost of a memory trigger at scale", b.String())
	for _, s := range steps {
		ratio := single(float64(s.On.RSSBytes) / float64(max(1, s.Off.RSSBytes)))
		r.target("9", fmt.Sprintf("manager RSS with a memory trigger over %d pods / without", s.Pods), fmt.Sprintf("<= %.2fx", costRSSLimit), atMost(costRSSLimit), ratio, times,
			fmt.Sprintf("%s (%.1f / %.1f MiB)", times(ratio.Median), mib(float64(s.On.RSSBytes)), mib(float64(s.Off.RSSBytes))))
		// A window of k resolutions holds at most k + 1 list starts.
		res := restartschedule.DefaultMetricsResolution
		allowed := float64(s.On.Window/res) + 1
		r.target("9", fmt.Sprintf("PodMetrics lists over %s with a memory trigger over %d pods (one per %s resolution)", s.On.Window, s.Pods, res),
			fmt.Sprintf("<= %.0f", allowed), atMost(allowed), single(s.On.PodMetricList), func(x float64) string { return fmt.Sprintf("%.0f", x) },
			fmt.Sprintf("%.0f (without the trigger %.0f)", s.On.PodMetricList, s.Off.PodMetricList))
	}
}
