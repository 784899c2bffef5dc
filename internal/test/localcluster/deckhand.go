package localcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// DeckhandOptions describe a Deckhand manager process run on this host
// against a local cluster.
type DeckhandOptions struct {
	// Binary is the deckhand executable (bin/deckhand).
	Binary string
	// Kubeconfig the manager uses; default the manager's ServiceAccount
	// with the roles of config/default (InstallManagerIdentity), as in a
	// real installation.
	Kubeconfig string
	// WebhookPort and CertDir: where the webhook server listens and the
	// certificate it serves (tls.crt/tls.key). Reused across restarts so the
	// installed webhook configurations stay valid. The manager runs with
	// --cert-management=external unless Args say otherwise.
	WebhookPort int
	CertDir     string
	// Name distinguishes the log files of several managers ("deckhand" by default).
	Name string
	// Args are extra flags (for example --leader-elect=true).
	Args []string
	// Env are extra environment variables ("GOMEMLIMIT=100MiB").
	Env []string
	// Stdout, if set, receives the manager's output instead of a log file.
	Stdout io.Writer
}

// DeckhandProcess is a running Deckhand manager.
type DeckhandProcess struct {
	opts        DeckhandOptions
	proc        *process
	HealthPort  int
	MetricsPort int
	dir         string
}

// StartDeckhand starts a Deckhand manager process and waits until /readyz
// answers (webhook server serving, caches started).
func (c *Cluster) StartDeckhand(ctx context.Context, opts DeckhandOptions) (*DeckhandProcess, error) {
	if opts.Kubeconfig == "" {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		id, err := c.InstallManagerIdentity(ctx, root)
		if err != nil {
			return nil, fmt.Errorf("manager identity: %w", err)
		}
		opts.Kubeconfig = id.Kubeconfig
	}
	if opts.Name == "" {
		opts.Name = "deckhand"
	}
	d := &DeckhandProcess{opts: opts, dir: c.dir}
	c.mu.Lock()
	c.managers = append(c.managers, d)
	c.mu.Unlock()
	return d, d.start(ctx)
}

func (d *DeckhandProcess) start(ctx context.Context) error {
	var err error
	if d.HealthPort, err = FreePort(); err != nil {
		return err
	}
	if d.MetricsPort, err = FreePort(); err != nil {
		return err
	}
	args := []string{
		"--kubeconfig", d.opts.Kubeconfig,
		"--webhook-host", "127.0.0.1",
		"--webhook-port", strconv.Itoa(d.opts.WebhookPort),
		"--webhook-cert-dir", d.opts.CertDir,
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(d.HealthPort),
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(d.MetricsPort),
		"--leader-election-namespace", ManagerNamespace,
		// CertDir holds a ready certificate (LocalWebhookCerts) and the
		// webhook configurations carry its CA (LocalWebhooks): the manager
		// must not manage certificates itself. Args may say otherwise
		// (--cert-management=self, as test/e2e does).
		"--cert-management=external",
		// No Service routes to a local manager, so a stop has no endpoint
		// to wait for; Args may set a drain (the planned-stop tests do).
		"--shutdown-drain=0",
	}
	args = append(args, d.opts.Args...)
	if d.opts.Stdout != nil {
		cmd := exec.Command(d.opts.Binary, args...)
		cmd.Env = append(os.Environ(), d.opts.Env...)
		cmd.Stdout, cmd.Stderr = d.opts.Stdout, d.opts.Stdout
		cmd.SysProcAttr = ChildProcAttr(syscall.SIGKILL)
		if err := cmd.Start(); err != nil {
			return err
		}
		p := &process{name: d.opts.Name, cmd: cmd, done: make(chan struct{})}
		go func() { p.waitErr = cmd.Wait(); close(p.done) }()
		d.proc = p
	} else {
		p, err := startProcess(d.dir, d.opts.Name, d.opts.Binary, args, d.opts.Env)
		if err != nil {
			return err
		}
		d.proc = p
	}
	return d.WaitReady(ctx, 60*time.Second)
}

// WaitReady waits until the manager's /readyz answers 200.
func (d *DeckhandProcess) WaitReady(ctx context.Context, timeout time.Duration) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", d.HealthPort)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if done, err := d.proc.exited(); done {
			return false, fmt.Errorf("deckhand exited: %v", err)
		}
		return answersOK(ctx, url)
	})
	if err != nil {
		return fmt.Errorf("deckhand not ready: %w\n%s", err, d.Logs(40))
	}
	return nil
}

// answersOK reports whether a GET of url answers 200. A request that fails
// is no error: the server polled may not listen yet.
func answersOK(ctx context.Context, url string) (bool, error) {
	resp, err := httpGet(ctx, url)
	if err != nil {
		return false, nil
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// httpGet sends a GET of url bound to ctx.
func httpGet(ctx context.Context, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}

// Kill ends the manager with SIGKILL, as a crash or an OOM kill would.
func (d *DeckhandProcess) Kill() { d.proc.kill() }

// Stop ends the manager gracefully (SIGTERM, then SIGKILL after 20s).
func (d *DeckhandProcess) Stop() { d.proc.stop(20 * time.Second) }

// Restart starts the manager again with the same options after Kill or Stop.
func (d *DeckhandProcess) Restart(ctx context.Context) error { return d.start(ctx) }

// Done is closed when the manager process ends.
func (d *DeckhandProcess) Done() <-chan struct{} { return d.proc.done }

// Exited reports whether the manager has ended.
func (d *DeckhandProcess) Exited() bool { done, _ := d.proc.exited(); return done }

// Pid is the manager's process id.
func (d *DeckhandProcess) Pid() int { return d.proc.cmd.Process.Pid }

// Logs returns the last n lines of the manager's log file.
func (d *DeckhandProcess) Logs(n int) string {
	if d.proc == nil || d.proc.logPath == "" {
		return ""
	}
	return d.proc.tail(n)
}

// WaitTLS waits until something serves TLS on 127.0.0.1:port.
func WaitTLS(ctx context.Context, port int, timeout time.Duration) error {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // liveness probe only
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
}

// LocalWebhookCerts creates a serving certificate for 127.0.0.1 in dir
// (tls.crt, tls.key, ca.crt) unless one is there already, and returns the CA.
func LocalWebhookCerts(dir string) ([]byte, error) {
	if ca, err := os.ReadFile(filepath.Join(dir, "ca.crt")); err == nil {
		if _, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")); err == nil {
			return ca, nil
		}
	}
	pair, err := NewLoopbackServingCert(365 * 24 * time.Hour)
	if err != nil {
		return nil, err
	}
	return pair.CAPEM, pair.WriteFiles(dir)
}

// BuildDeckhand builds cmd/deckhand of the repository at root into dir and
// returns the binary's path. Suites build the manager from the tree under
// test, so that a stale bin/deckhand can never be what they test.
func BuildDeckhand(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "deckhand")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/deckhand")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("building deckhand: %w", err)
	}
	return bin, nil
}
