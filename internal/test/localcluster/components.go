package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

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
	tokenLines := adminToken + `,admin,admin-uid,"system:masters"` + "\n"
	if c.opts.Metrics {
		tokenLines += metricsServerToken + "," + metricsServerUser + ",metrics-server-uid\n"
	}
	if err := os.WriteFile(tokens, []byte(tokenLines), 0o600); err != nil {
		return err
	}
	admissionConfig := filepath.Join(c.dir, "admission.yaml")
	if err := os.WriteFile(admissionConfig, []byte(podSecurityAdmission), 0o600); err != nil {
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
		"--admission-control-config-file", admissionConfig,
		"--profiling=false",
		"--v=1",
	}
	if !c.opts.ControllerManager {
		// Without kube-controller-manager nothing creates the "default"
		// ServiceAccount of a namespace, and this plugin would refuse every pod.
		apiArgs = append(apiArgs, "--disable-admission-plugins", "ServiceAccount")
	}
	if c.opts.Metrics {
		aggregation, err := aggregationArgs(pki)
		if err != nil {
			return err
		}
		apiArgs = append(apiArgs, aggregation...)
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

// podSecurityAdmission states the levels of the API server's PodSecurity
// admission, as a hardened cluster's admission configuration does: every
// namespace privileged unless its pod-security.kubernetes.io labels say
// otherwise, and no exemptions, so a namespace labelled
// pod-security.kubernetes.io/enforce=restricted refuses what that standard
// refuses.
const podSecurityAdmission = `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: PodSecurity
  configuration:
    apiVersion: pod-security.admission.config.k8s.io/v1
    kind: PodSecurityConfiguration
    defaults:
      enforce: privileged
      enforce-version: latest
      audit: privileged
      audit-version: latest
      warn: privileged
      warn-version: latest
    exemptions:
      usernames: []
      runtimeClasses: []
      namespaces: []
`
