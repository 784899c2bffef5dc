package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(deckhandv1alpha1.AddToScheme(s))
	return s
}()

// env is one local cluster with Deckhand's CRDs and webhooks installed and
// a Deckhand manager process.
type env struct {
	name    string
	root    string
	cluster *localcluster.Cluster
	c       client.Client // uncached, no client-side rate limit
	cs      kubernetes.Interface
	mgr     *localcluster.DeckhandProcess
	hooks   localcluster.LocalWebhooks
	port    int
	certDir string
	bin     string
	mgrArgs []string
	starts  int
	// pprofPort serves the manager's net/http/pprof (--pprof-bind-address).
	pprofPort int
}

func startEnv(ctx context.Context, cfg *config, name string, opts localcluster.Options, mgrArgs []string) (*env, error) {
	opts.BinDir = cfg.k8sBin
	logf("[%s] starting cluster", name)
	t0 := time.Now()
	cl, err := localcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	e := &env{name: name, root: cfg.root, cluster: cl, bin: cfg.deckhand, mgrArgs: mgrArgs}
	ok := false
	defer func() {
		if !ok {
			e.stop()
		}
	}()
	if e.c, err = client.New(cl.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	e.cs = cl.Clientset()
	if err := localcluster.InstallCRDs(cl.Config, filepath.Join(cfg.root, "config", "crd", "bases")); err != nil {
		return nil, err
	}
	e.certDir = filepath.Join(cl.Dir(), "webhook-certs")
	ca, err := localcluster.LocalWebhookCerts(e.certDir)
	if err != nil {
		return nil, err
	}
	if e.port, err = localcluster.FreePort(); err != nil {
		return nil, err
	}
	e.hooks = localcluster.LocalWebhooks{
		ManifestPath: filepath.Join(cfg.root, "config", "webhook", "manifests.yaml"),
		URL:          "https://127.0.0.1:" + strconv.Itoa(e.port),
		CABundle:     ca,
	}
	if err := e.hooks.Install(ctx, e.cs); err != nil {
		return nil, err
	}
	logf("[%s] cluster ready in %s", name, time.Since(t0).Round(100*time.Millisecond))
	if _, err := e.startManager(ctx, nil); err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

// startManager starts a new manager process (stopping a running one first)
// and returns the time the process was started.
// startManager (re)starts the manager, with extra environment variables.
func (e *env) startManager(ctx context.Context, environ []string) (time.Time, error) {
	if e.mgr != nil && !e.mgr.Exited() {
		e.mgr.Stop()
	}
	e.starts++
	args := append([]string{"--leader-elect=false", "--metrics-secure=false", "--cert-management=external"}, e.mgrArgs...)
	if p, err := localcluster.FreePort(); err == nil {
		e.pprofPort = p
		args = append(args, fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", p))
	}
	t0 := time.Now()
	m, err := e.cluster.StartDeckhand(ctx, localcluster.DeckhandOptions{
		Binary:      e.bin,
		WebhookPort: e.port,
		CertDir:     e.certDir,
		Name:        fmt.Sprintf("deckhand-%d", e.starts),
		Args:        args,
		Env:         environ,
	})
	if err != nil {
		return t0, err
	}
	e.mgr = m
	return t0, nil
}

func (e *env) managerLog() string {
	return filepath.Join(e.cluster.Dir(), fmt.Sprintf("deckhand-%d.log", e.starts))
}

func (e *env) stop() {
	if e.mgr != nil {
		e.mgr.Stop()
	}
	if e.cluster != nil {
		e.cluster.Stop()
	}
}

func (e *env) namespace(ctx context.Context, name string) error {
	return e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// ---- metrics ----

type sample struct {
	labels map[string]string
	value  float64
}

// metrics is a parsed Prometheus text exposition.
type metrics map[string][]sample

func parseMetrics(r io.Reader) metrics {
	m := metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		labels := map[string]string{}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			name = line[:i]
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			parseLabels(line[i+1:j], labels)
			rest = strings.TrimSpace(line[j+1:])
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, rest = line[:i], strings.TrimSpace(line[i+1:])
		}
		if f := strings.Fields(rest); len(f) > 0 {
			v, err := strconv.ParseFloat(f[0], 64)
			if err == nil {
				m[name] = append(m[name], sample{labels, v})
			}
		}
	}
	return m
}

func parseLabels(s string, out map[string]string) {
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return
		}
		key := strings.TrimSpace(s[:eq])
		s = s[eq+2:]
		var b strings.Builder
		i := 0
		for ; i < len(s); i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				b.WriteByte(s[i])
				continue
			}
			if s[i] == '"' {
				break
			}
			b.WriteByte(s[i])
		}
		out[key] = b.String()
		s = strings.TrimLeft(s[min(i+1, len(s)):], ", ")
	}
}

// sum adds the samples of name whose labels match every key=value in match.
func (m metrics) sum(name string, match ...string) float64 {
	var t float64
outer:
	for _, s := range m[name] {
		for i := 0; i+1 < len(match); i += 2 {
			if s.labels[match[i]] != match[i+1] {
				continue outer
			}
		}
		t += s.value
	}
	return t
}

// sumBy groups the samples of name by one label.
func (m metrics) sumBy(name, label string, match ...string) map[string]float64 {
	out := map[string]float64{}
outer:
	for _, s := range m[name] {
		for i := 0; i+1 < len(match); i += 2 {
			if s.labels[match[i]] != match[i+1] {
				continue outer
			}
		}
		out[s.labels[label]] += s.value
	}
	return out
}

func (e *env) managerMetrics(ctx context.Context) (metrics, error) {
	body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", e.mgr.MetricsPort))
	if err != nil {
		return nil, err
	}
	return parseMetrics(bytes.NewReader(body)), nil
}

// httpGet returns the body of a GET answered 200 OK.
func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func (e *env) apiserverMetrics(ctx context.Context) (metrics, error) {
	body, err := e.cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return parseMetrics(strings.NewReader(string(body))), nil
}

// snapshot is both metric sets at one instant.
type snapshot struct{ mgr, api metrics }

func (e *env) snapshot(ctx context.Context) snapshot {
	var s snapshot
	var err error
	if s.mgr, err = e.managerMetrics(ctx); err != nil {
		logf("manager metrics: %v", err)
	}
	if s.api, err = e.apiserverMetrics(ctx); err != nil {
		logf("apiserver metrics: %v", err)
	}
	return s
}

// cost is the request and reconcile counts between two snapshots.
type cost struct {
	mgrRequests     float64            // the manager's own API requests (rest_client_requests_total)
	mgrByMethod     map[string]float64 // ... by HTTP method
	kcmRequests     float64            // requests of kube-controller-manager's controllers (APF flow schema kube-system-service-accounts)
	apiMutating     float64            // every POST/PUT/PATCH/DELETE the API server served
	apiAll          float64            // every request the API server served (watches excluded)
	reconciles      map[string]float64 // controller_runtime_reconcile_total by controller
	apiByResourceMu map[string]float64 // mutating requests by resource
}

func diff(a, b snapshot) cost {
	c := cost{mgrByMethod: map[string]float64{}, reconciles: map[string]float64{}, apiByResourceMu: map[string]float64{}}
	c.mgrRequests = b.mgr.sum("rest_client_requests_total") - a.mgr.sum("rest_client_requests_total")
	am, bm := a.mgr.sumBy("rest_client_requests_total", "method"), b.mgr.sumBy("rest_client_requests_total", "method")
	for k, v := range bm {
		if d := v - am[k]; d > 0 {
			c.mgrByMethod[k] = d
		}
	}
	const flow = "apiserver_flowcontrol_dispatched_requests_total"
	c.kcmRequests = b.api.sum(flow, "flow_schema", "kube-system-service-accounts") - a.api.sum(flow, "flow_schema", "kube-system-service-accounts")
	for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "CREATE", "UPDATE"} {
		c.apiMutating += b.api.sum("apiserver_request_total", "verb", verb) - a.api.sum("apiserver_request_total", "verb", verb)
		ar, br := a.api.sumBy("apiserver_request_total", "resource", "verb", verb), b.api.sumBy("apiserver_request_total", "resource", "verb", verb)
		for k, v := range br {
			if d := v - ar[k]; d > 0 {
				c.apiByResourceMu[k] += d
			}
		}
	}
	c.apiAll = b.api.sum("apiserver_request_total") - a.api.sum("apiserver_request_total") -
		(b.api.sum("apiserver_request_total", "verb", "WATCH") - a.api.sum("apiserver_request_total", "verb", "WATCH"))
	ar, br := a.mgr.sumBy("controller_runtime_reconcile_total", "controller"), b.mgr.sumBy("controller_runtime_reconcile_total", "controller")
	for k, v := range br {
		if d := v - ar[k]; d > 0 {
			c.reconciles[k] = d
		}
	}
	return c
}

// ---- process figures ----

// rssBytes reads VmRSS from /proc/<pid>/status.
func rssBytes(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, err := strconv.ParseInt(f[1], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// cachesSynced waits until every controller the manager started has logged
// "Starting workers" (controller-runtime does so once the controller's
// caches have synced) and returns when the bench saw the last such line (the
// log's timestamps have whole seconds only; the bench reads the log every
// 20 ms).
// want, when > 0, is the number of controllers to wait for (the count the
// same manager reached on an empty cluster): controllers do not all log
// "Starting Controller" at once when the caches are large.
func cachesSynced(ctx context.Context, logPath string, want int, timeout time.Duration) (time.Time, int, error) {
	var n, lastStarting, lastN int
	var at, changed time.Time
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		data, err := os.ReadFile(logPath)
		if err != nil {
			return false, nil
		}
		s := string(data)
		starting := strings.Count(s, `"msg":"Starting Controller"`)
		n = strings.Count(s, `"msg":"Starting workers"`)
		now := time.Now()
		if starting != lastStarting || n != lastN {
			lastStarting, lastN, changed = starting, n, now
			if starting > 0 && n == starting && (want == 0 || n >= want) {
				at = now
			}
		}
		// Done once every started controller has its workers and no new
		// controller has shown up for 3 seconds (the manager adds its
		// controllers once its webhook certificates are ready, and a late
		// one was seen to start a second after the first ones were running).
		// The figure is the time of the last change, not of the wait.
		if want > 0 {
			return n >= want, nil
		}
		return starting > 0 && n == starting && now.Sub(changed) >= 3*time.Second, nil
	})
	return at, n, err
}

// pprofGet fetches /debug/pprof/<kind> from the manager.
func (e *env) pprofGet(ctx context.Context, kind string) ([]byte, error) {
	if e.pprofPort == 0 {
		return nil, fmt.Errorf("the manager serves no pprof endpoint")
	}
	return httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/%s", e.pprofPort, kind))
}

// forceGC makes the manager run a garbage collection (the heap profile
// handler does one when asked with gc=1).
func (e *env) forceGC(ctx context.Context) error {
	_, err := e.pprofGet(ctx, "heap?gc=1")
	return err
}

// saveProfile fetches a pprof profile from the manager into bin/bench-profiles.
func (e *env) saveProfile(ctx context.Context, cfg *config, kind, name string) {
	if e.pprofPort == 0 {
		return
	}
	data, err := e.pprofGet(ctx, kind)
	if err != nil {
		logf("pprof %s: %v", kind, err)
		return
	}
	dir := filepath.Join(cfg.root, "bin", "bench-profiles")
	_ = os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, name+".pprof")
	if err := os.WriteFile(path, data, 0o644); err == nil {
		logf("saved %s", path)
	}
}

// ---- statistics ----

// percentile is the nearest-rank percentile p (0..100] of d.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
func secs(d time.Duration) string {
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// ---- pod tracking ----

// podTracker follows the pods of one namespace through an informer.
type podTracker struct {
	mu      sync.Mutex
	pods    map[string]bool // name -> Ready
	stop    chan struct{}
	factory informers.SharedInformerFactory
}

func trackPods(ctx context.Context, cs kubernetes.Interface, ns string) (*podTracker, error) {
	t := &podTracker{pods: map[string]bool{}, stop: make(chan struct{})}
	t.factory = informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
	inf := t.factory.Core().V1().Pods().Informer()
	set := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		t.mu.Lock()
		t.pods[p.Name] = ready
		t.mu.Unlock()
	}
	_, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, n any) { set(n) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				t.mu.Lock()
				delete(t.pods, p.Name)
				t.mu.Unlock()
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

func (t *podTracker) counts() (total, ready int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.pods {
		total++
		if r {
			ready++
		}
	}
	return
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

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
