package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Options choose which components a Cluster runs.
type Options struct {
	// BinDir holds the binaries; default DefaultBinDir().
	BinDir string
	// Dir is the working directory (data, certificates, logs, kubeconfig).
	// Empty means a new temporary directory, removed by Stop.
	Dir string
	// ControllerManager starts kube-controller-manager (Deployments,
	// ReplicaSets, garbage collection, service-account tokens).
	ControllerManager bool
	// Scheduler starts kube-scheduler.
	Scheduler bool
	// FakeNodes > 0 starts kwok and registers that many fake nodes, on which
	// scheduled pods become Running and Ready.
	FakeNodes int
	// Metrics, with FakeNodes, serves simulated usage of the pods on the
	// fake nodes (metrics.go) through real servers: kwok serves each fake
	// node's kubelet resource metrics and DCGM exporter, metrics-server
	// serves metrics.k8s.io through the API server's aggregation layer
	// (`kubectl top pods`), and Prometheus scrapes the DCGM exporters.
	Metrics bool
	// ResourceMetricsOnly, with Metrics, leaves out the DCGM exporters and
	// Prometheus, so that metrics-server alone reads kwok: at tens of
	// thousands of pods, Prometheus's scrapes every second take kwok most
	// of the machine's CPU.
	ResourceMetricsOnly bool
	// MetricsResolution, with Metrics, is how often metrics-server scrapes
	// the fake nodes (0: MetricsServerResolution). A node's scrape may take
	// most of it: at tens of thousands of pods kwok needs longer than the
	// shortest resolution allows to compute every pod's usage.
	MetricsResolution time.Duration
	// EtcdFsync keeps etcd's disk syncs. Off by default: the data is
	// throw-away, and fsync latency (about 20 ms a write on these machines)
	// would otherwise dominate every test and benchmark.
	EtcdFsync bool
	// ClientQPS and ClientBurst, when set, replace the client-side rate
	// limits of kube-controller-manager and kube-scheduler (their defaults
	// are QPS 20/burst 30 and QPS 50/burst 100).
	ClientQPS   float32
	ClientBurst int
	// SchedulerClientQPS and SchedulerClientBurst, when set, replace the
	// scheduler's limits only (they win over ClientQPS/ClientBurst), so that
	// kube-controller-manager can keep its defaults while the scheduler is
	// not the bottleneck (benchmarks).
	SchedulerClientQPS   float32
	SchedulerClientBurst int
	// ExtraAPIServerArgs are appended to kube-apiserver's flags.
	ExtraAPIServerArgs []string
	// Progress, if set, receives one line per step ("starting etcd", ...).
	Progress io.Writer
}

// Full returns options for a complete cluster: controller-manager,
// scheduler and n fake nodes.
func Full(n int) Options {
	return Options{ControllerManager: true, Scheduler: true, FakeNodes: n}
}

// Cluster is a running local control plane.
type Cluster struct {
	opts Options
	dir  string
	temp bool

	// Config is the admin (system:masters) client configuration.
	Config *rest.Config
	// KubeconfigPath is the admin kubeconfig file.
	KubeconfigPath string
	// APIServerURL is https://127.0.0.1:<port>.
	APIServerURL string
	// CAPEM is the CA of the API server's serving certificate.
	CAPEM []byte
	// MetricsServerURL and PrometheusURL are the addresses of
	// metrics-server and Prometheus (Options.Metrics).
	MetricsServerURL string
	PrometheusURL    string

	// kwokPort is the port of kwok's server (Options.Metrics).
	kwokPort int

	mu        sync.Mutex
	procs     map[string]*process
	specs     map[string]procSpec
	stopOnce  sync.Once
	clientset kubernetes.Interface

	identityMu sync.Mutex
	identity   *ManagerIdentity
	managers   []*DeckhandProcess
}

type procSpec struct {
	bin  string
	args []string
}

// HardenedAdmissionPlugins are the admission plugins every local API server
// enables on top of kube-apiserver's defaults.
var HardenedAdmissionPlugins = []string{"OwnerReferencesPermissionEnforcement"}

const (
	adminToken = "deckhand-local-admin-token"
	// FakeNodeAnnotation marks the nodes kwok manages.
	FakeNodeAnnotation = "kwok.x-k8s.io/node"
)

// DefaultBinDir is $DECKHAND_K8S_BIN, or bin/k8s at the root of the
// repository that contains the working directory.
func DefaultBinDir() string {
	if d := os.Getenv("DECKHAND_K8S_BIN"); d != "" {
		return d
	}
	if root, err := RepoRoot(); err == nil {
		return filepath.Join(root, "bin", "k8s")
	}
	return filepath.Join("bin", "k8s")
}

// RepoRoot walks up from the working directory to Deckhand's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/deckhand-dev/deckhand\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the deckhand repository")
		}
		dir = parent
	}
}

// NoControlPlaneEnv names the environment variable that makes Start refuse
// to start anything. `make test-unit` sets it, so that a test that needs a
// control plane but does not skip in -short mode fails there, naming itself,
// instead of quietly turning the quick loop into the long one.
const NoControlPlaneEnv = "DECKHAND_NO_CONTROL_PLANE"

// Start brings up the components opts asks for and waits until they work.
// On error everything started so far is stopped again.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if os.Getenv(NoControlPlaneEnv) != "" {
		return nil, fmt.Errorf("%s is set (make test-unit runs no control plane): a test that starts one must skip when testing.Short() is true", NoControlPlaneEnv)
	}
	if opts.BinDir == "" {
		opts.BinDir = DefaultBinDir()
	}
	for _, b := range requiredBinaries(opts) {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make k8s-binaries metrics-binaries` first", b, opts.BinDir)
		}
	}
	if opts.Metrics && opts.FakeNodes == 0 {
		return nil, errors.New("Options.Metrics needs fake nodes (Options.FakeNodes)")
	}
	if opts.ResourceMetricsOnly && !opts.Metrics {
		return nil, errors.New("Options.ResourceMetricsOnly needs Options.Metrics")
	}
	if opts.MetricsResolution != 0 && opts.MetricsResolution < MetricsServerResolution {
		return nil, fmt.Errorf("Options.MetricsResolution %s is shorter than metrics-server accepts (%s)", opts.MetricsResolution, MetricsServerResolution)
	}
	c = &Cluster{opts: opts, dir: opts.Dir, procs: map[string]*process{}, specs: map[string]procSpec{}}
	if c.dir == "" {
		if c.dir, err = os.MkdirTemp("", "deckhand-cluster-"); err != nil {
			return nil, err
		}
		c.temp = true
	} else if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, c.Logs(40))
			c.Stop()
			c = nil
		}
	}()

	if err := c.startEtcdAndAPIServer(ctx); err != nil {
		return c, err
	}
	if opts.ControllerManager {
		if err := c.startControllerManager(ctx); err != nil {
			return c, err
		}
	}
	if opts.Scheduler {
		if err := c.startScheduler(); err != nil {
			return c, err
		}
	}
	if opts.FakeNodes > 0 {
		if err := c.startKwok(ctx); err != nil {
			return c, err
		}
	}
	if opts.Metrics {
		if err := c.startMetricsServer(ctx); err != nil {
			return c, err
		}
		if !opts.ResourceMetricsOnly {
			if err := c.startPrometheus(ctx); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

func requiredBinaries(opts Options) []string {
	bins := []string{"etcd", "kube-apiserver"}
	if opts.ControllerManager {
		bins = append(bins, "kube-controller-manager")
	}
	if opts.Scheduler {
		bins = append(bins, "kube-scheduler")
	}
	if opts.FakeNodes > 0 {
		bins = append(bins, "kwok", "kwok-stages.yaml")
	}
	if opts.Metrics {
		bins = append(bins, "metrics-server")
		if !opts.ResourceMetricsOnly {
			bins = append(bins, "prometheus")
		}
	}
	return bins
}

func (c *Cluster) progress(format string, args ...any) {
	if c.opts.Progress != nil {
		fmt.Fprintf(c.opts.Progress, format+"\n", args...)
	}
}

// Dir is the cluster's working directory (logs, kubeconfig, certificates).
func (c *Cluster) Dir() string { return c.dir }

// BinDir is where the cluster's binaries are.
func (c *Cluster) BinDir() string { return c.opts.BinDir }

// Clientset is an admin clientset for the cluster.
func (c *Cluster) Clientset() kubernetes.Interface { return c.clientset }

// Logs returns the last n lines of every component's log.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	copyLogs(&b, c.dir, n)
	return b.String()
}

// Stop ends every component (newest first) and removes a temporary working
// directory. It is safe to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		order := []string{"prometheus", "metrics-server", "kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"}
		c.mu.Lock()
		procs := c.procs
		c.mu.Unlock()
		for _, name := range order {
			if p := procs[name]; p != nil {
				p.stop(10 * time.Second)
			}
		}
		if c.temp {
			_ = os.RemoveAll(c.dir)
		}
	})
}
