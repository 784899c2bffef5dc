package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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

// Start brings up the components opts asks for and waits until they work.
// On error everything started so far is stopped again.
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	if opts.BinDir == "" {
		opts.BinDir = DefaultBinDir()
	}
	for _, b := range requiredBinaries(opts) {
		if _, err := os.Stat(filepath.Join(opts.BinDir, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run `make k8s-binaries` first", b, opts.BinDir)
		}
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

func (c *Cluster) startEtcdAndAPIServer(ctx context.Context) error {
	etcdClient, err := FreePort()
	if err != nil {
		return err
	}
	etcdPeer, err := FreePort()
	if err != nil {
		return err
	}
	apiPort, err := FreePort()
	if err != nil {
		return err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdClient)
	etcdArgs := []string{
		"--name", "deckhand-local",
		"--data-dir", filepath.Join(c.dir, "etcd"),
		"--listen-client-urls", etcdURL,
		"--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", etcdPeer),
		"--initial-cluster", fmt.Sprintf("deckhand-local=http://127.0.0.1:%d", etcdPeer),
		"--log-level", "warn",
		"--quota-backend-bytes", strconv.Itoa(8 << 30),
	}
	if !c.opts.EtcdFsync {
		etcdArgs = append(etcdArgs, "--unsafe-no-fsync")
	}
	c.progress("starting etcd on %s", etcdURL)
	if err := c.startComponent("etcd", "etcd", etcdArgs); err != nil {
		return err
	}

	pki := filepath.Join(c.dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	serving, err := NewLoopbackServingCert(365 * 24 * time.Hour)
	if err != nil {
		return err
	}
	if err := serving.WriteFiles(pki); err != nil {
		return err
	}
	c.CAPEM = serving.CAPEM
	saKey, saPub, err := writeServiceAccountKey(pki)
	if err != nil {
		return err
	}
	tokens := filepath.Join(pki, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(adminToken+`,admin,admin-uid,"system:masters"`+"\n"), 0o600); err != nil {
		return err
	}
	apiArgs := []string{
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1",
		"--advertise-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(apiPort),
		"--cert-dir", pki,
		"--tls-cert-file", filepath.Join(pki, "tls.crt"),
		"--tls-private-key-file", filepath.Join(pki, "tls.key"),
		"--client-ca-file", filepath.Join(pki, "ca.crt"),
		"--token-auth-file", tokens,
		"--authorization-mode", "RBAC",
		"--service-account-key-file", saPub,
		"--service-account-signing-key-file", saKey,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--api-audiences", "https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--allow-privileged=true",
		// The defaults plus what hardened clusters (OpenShift among them)
		// add: setting blockOwnerDeletion on an owner reference needs
		// update on the owner's finalizers subresource.
		"--enable-admission-plugins", strings.Join(HardenedAdmissionPlugins, ","),
		"--profiling=false",
		"--v=1",
	}
	if !c.opts.ControllerManager {
		// Without kube-controller-manager nothing creates the "default"
		// ServiceAccount of a namespace, and this plugin would refuse every pod.
		apiArgs = append(apiArgs, "--disable-admission-plugins", "ServiceAccount")
	}
	apiArgs = append(apiArgs, c.opts.ExtraAPIServerArgs...)
	c.APIServerURL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	c.progress("starting kube-apiserver on %s", c.APIServerURL)
	if err := c.startComponent("kube-apiserver", "kube-apiserver", apiArgs); err != nil {
		return err
	}

	c.Config = &rest.Config{
		Host:            c.APIServerURL,
		BearerToken:     adminToken,
		TLSClientConfig: rest.TLSClientConfig{CAData: serving.CAPEM},
		QPS:             -1, // no client-side rate limit for the harness itself
	}
	c.KubeconfigPath = filepath.Join(c.dir, "kubeconfig")
	if err := writeKubeconfig(c.KubeconfigPath, c.APIServerURL, serving.CAPEM, "admin", adminToken); err != nil {
		return err
	}
	if c.clientset, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	return c.WaitAPIServerReady(ctx, 90*time.Second)
}

// WaitAPIServerReady waits until kube-apiserver's /readyz answers ok.
func (c *Cluster) WaitAPIServerReady(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := c.checkAlive("etcd", "kube-apiserver"); err != nil {
			return false, err
		}
		body, err := c.clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		return string(body) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver not ready: %w (last answer: %s)", err, last)
	}
	return nil
}

func (c *Cluster) startControllerManager(ctx context.Context) error {
	pki := filepath.Join(c.dir, "pki")
	args := []string{
		"--kubeconfig", c.KubeconfigPath,
		"--service-account-private-key-file", filepath.Join(pki, "sa.key"),
		"--root-ca-file", filepath.Join(pki, "ca.crt"),
		"--use-service-account-credentials",
		"--leader-elect=false",
		"--controllers", "*,-nodeipam",
		"--secure-port", "0",
		"--v=1",
	}
	args = append(args, c.clientLimitArgs()...)
	c.progress("starting kube-controller-manager")
	if err := c.startComponent("kube-controller-manager", "kube-controller-manager", args); err != nil {
		return err
	}
	// The controller-manager works once it has created the "default"
	// ServiceAccount; pods cannot be admitted before that.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.checkAlive("kube-controller-manager"); err != nil {
			return false, err
		}
		_, err := c.clientset.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kube-controller-manager did not create the default ServiceAccount: %w", err)
	}
	return nil
}

func (c *Cluster) clientLimitArgs() []string {
	var args []string
	if c.opts.ClientQPS > 0 {
		args = append(args, "--kube-api-qps", strconv.FormatFloat(float64(c.opts.ClientQPS), 'f', -1, 32))
	}
	if c.opts.ClientBurst > 0 {
		args = append(args, "--kube-api-burst", strconv.Itoa(c.opts.ClientBurst))
	}
	return args
}

func (c *Cluster) startScheduler() error {
	cfg := filepath.Join(c.dir, "scheduler.yaml")
	qps, burst := float32(50), 100
	if c.opts.ClientQPS > 0 {
		qps = c.opts.ClientQPS
	}
	if c.opts.ClientBurst > 0 {
		burst = c.opts.ClientBurst
	}
	if c.opts.SchedulerClientQPS > 0 {
		qps = c.opts.SchedulerClientQPS
	}
	if c.opts.SchedulerClientBurst > 0 {
		burst = c.opts.SchedulerClientBurst
	}
	conf := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  qps: %g
  burst: %d
leaderElection:
  leaderElect: false
`, c.KubeconfigPath, qps, burst)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		return err
	}
	c.progress("starting kube-scheduler")
	return c.startComponent("kube-scheduler", "kube-scheduler", []string{"--config", cfg, "--secure-port", "0", "--v=1"})
}

func (c *Cluster) startKwok(ctx context.Context) error {
	stages, err := c.writeKwokStages()
	if err != nil {
		return err
	}
	args := []string{
		"--kubeconfig", c.KubeconfigPath,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector", FakeNodeAnnotation + "=fake",
		"--cidr", "10.244.0.1/16",
		"--node-ip", "10.0.0.1",
		"--node-lease-duration-seconds", "40",
		"--server-address", "",
		"--config", stages,
		"--v", "WARN",
	}
	c.progress("starting kwok with %d fake node(s)", c.opts.FakeNodes)
	if err := c.startComponent("kwok", "kwok", args); err != nil {
		return err
	}
	for i := range c.opts.FakeNodes {
		if err := c.CreateFakeNode(ctx, fmt.Sprintf("kwok-node-%d", i)); err != nil {
			return err
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.checkAlive("kwok"); err != nil {
			return false, err
		}
		nodes, err := c.clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= c.opts.FakeNodes, nil
	})
	if err != nil {
		return fmt.Errorf("fake nodes did not become Ready: %w", err)
	}
	return nil
}

// CreateFakeNode registers a node that kwok manages: large enough for any
// test, with no taints, so ordinary pods schedule on it.
func (c *Cluster) CreateFakeNode(ctx context.Context, name string) error {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("1000"),
		corev1.ResourceMemory: resource.MustParse("4Ti"),
		corev1.ResourcePods:   resource.MustParse("20000"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{FakeNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	_, err := c.clientset.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (c *Cluster) startComponent(name, bin string, args []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	spec := procSpec{bin: filepath.Join(c.opts.BinDir, bin), args: args}
	p, err := startProcess(c.dir, name, spec.bin, spec.args, nil)
	if err != nil {
		return err
	}
	c.procs[name] = p
	c.specs[name] = spec
	return nil
}

// checkAlive fails if one of the named components has exited.
func (c *Cluster) checkAlive(names ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range names {
		p := c.procs[n]
		if p == nil {
			continue
		}
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited (%v); last log lines:\n%s", n, err, p.tail(30))
		}
	}
	return nil
}

// RestartAPIServer stops kube-apiserver and starts it again with the same
// flags and port, as a control-plane upgrade or crash would, and waits
// until it is ready.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) error {
	c.mu.Lock()
	p, spec := c.procs["kube-apiserver"], c.specs["kube-apiserver"]
	c.mu.Unlock()
	if p == nil {
		return errors.New("kube-apiserver is not running")
	}
	p.stop(10 * time.Second)
	time.Sleep(down)
	if err := c.startComponent("kube-apiserver", "kube-apiserver", spec.args); err != nil {
		return err
	}
	return c.WaitAPIServerReady(ctx, 90*time.Second)
}

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
		order := []string{"kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"}
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

func writeKubeconfig(path, server string, ca []byte, user, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["deckhand-local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["deckhand-local"] = &clientcmdapi.Context{Cluster: "deckhand-local", AuthInfo: user}
	cfg.CurrentContext = "deckhand-local"
	return clientcmd.WriteToFile(*cfg, path)
}

// WriteKubeconfig writes a kubeconfig for this cluster that authenticates
// with token (for example a ServiceAccount token from the TokenRequest API).
func (c *Cluster) WriteKubeconfig(path, user, token string) error {
	return writeKubeconfig(path, c.APIServerURL, c.CAPEM, user, token)
}
