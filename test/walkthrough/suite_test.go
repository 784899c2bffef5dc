package walkthrough

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// readyBanner is the first line of what devcluster prints once the samples
// are applied and Deckhand is running: the moment a user of `make run`
// starts typing.
const readyBanner = "Deckhand is running against a local cluster"

// suite is the devcluster every walkthrough runs against.
var suite struct {
	root       string
	k8sBin     string
	kubeconfig string
	// output is devcluster's stdout and stderr: its progress lines and the
	// manager's log.
	output string
	// client is cluster-admin, for the checks of what each doc claims;
	// clientset the same, for watches.
	client    client.Client
	clientset kubernetes.Interface
}

func TestMain(m *testing.M) {
	os.Exit(testutil.RunSuite("walkthrough", 5*time.Minute, func(s *testutil.Suite) int { return runSuite(m, s) }))
}

func runSuite(m *testing.M, s *testutil.Suite) int {
	fail, ctx, root, work := s.Fail, s.Ctx, s.Root, s.Work
	suite.root, suite.k8sBin = root, localcluster.DefaultBinDir()
	if _, err := os.Stat(filepath.Join(suite.k8sBin, "kubectl")); err != nil {
		return fail("control-plane binaries: %v (run `make k8s-binaries` or set DECKHAND_K8S_BIN)", err)
	}

	// Both programs are built from this tree, so a stale bin/deckhand or
	// bin/devcluster can never be what the docs are checked against.
	deckhand, devcluster := filepath.Join(work, "deckhand"), filepath.Join(work, "devcluster")
	for pkg, out := range map[string]string{"./cmd/deckhand": deckhand, "./hack/devcluster": devcluster} {
		build := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fail("building %s: %v", pkg, err)
		}
	}

	// The same command line as `make run`, but in a directory of its own.
	dir := filepath.Join(work, "dev")
	suite.kubeconfig = filepath.Join(dir, "kubeconfig")
	suite.output = filepath.Join(work, "devcluster.out")
	dc, err := startDevcluster(root, suite.output, devcluster,
		"--deckhand", deckhand, "--k8s-bin", suite.k8sBin, "--dir", dir,
		"--samples", filepath.Join(root, "config", "samples"))
	if err != nil {
		return fail("%v", err)
	}
	defer dc.stop()
	// A Ctrl-C must not leave the cluster running, nor its directory behind.
	// (When `go test -timeout` ends the binary, Pdeathsig stops devcluster.)
	defer localcluster.StopOnInterrupt(func() { dc.stop(); os.RemoveAll(work) })()

	if err := dc.waitForOutput(ctx, readyBanner, 4*time.Minute); err != nil {
		return fail("%v\n----- devcluster output (tail) -----\n%s", err, dc.tail(60))
	}
	startup := localcluster.ForbiddenLines(dc.outputSince(0))
	if len(startup) > 0 {
		return fail("the manager logged refused requests while starting and applying the samples:\n%s", strings.Join(startup, "\n"))
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", suite.kubeconfig)
	if err != nil {
		return fail("%v", err)
	}
	if suite.client, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return fail("%v", err)
	}
	if suite.clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return fail("%v", err)
	}

	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "----- devcluster output (tail) -----\n%s\n", dc.tail(80))
	}
	return code
}

// devcluster is the `make run` program running as a child process.
type devcluster struct {
	cmd      *exec.Cmd
	out      *os.File
	done     chan struct{}
	stopOnce sync.Once
}

func startDevcluster(dir, outPath, bin string, args ...string) (*devcluster, error) {
	out, err := os.Create(outPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	// Its own process group, so that a Ctrl-C in the terminal reaches only
	// this process, which then stops the cluster itself; SIGTERM (which it
	// also handles) if the test binary dies without stopping it.
	cmd.SysProcAttr = localcluster.ChildProcAttr(syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("starting devcluster: %w", err)
	}
	d := &devcluster{cmd: cmd, out: out, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(d.done) }()
	return d, nil
}

// stop interrupts devcluster as Ctrl-C does and waits for it to stop every
// process it started; it kills it only if that takes too long.
func (d *devcluster) stop() {
	d.stopOnce.Do(func() {
		_ = d.cmd.Process.Signal(os.Interrupt)
		select {
		case <-d.done:
		case <-time.After(60 * time.Second):
			fmt.Fprintln(os.Stderr, "walkthrough: devcluster did not stop within 60s; killing it")
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.done
		}
		d.out.Close()
	})
}

func (d *devcluster) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// waitForOutput waits until devcluster has printed want.
func (d *devcluster) waitForOutput(ctx context.Context, want string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if strings.Contains(d.outputSince(0), want) {
			return nil
		}
		if d.exited() {
			return errors.New("devcluster exited before it was ready")
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("devcluster did not print %q within %s", want, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (d *devcluster) outputSince(offset int64) string { return outputSince(d.out.Name(), offset) }

func (d *devcluster) tail(n int) string {
	lines := strings.Split(strings.TrimRight(d.outputSince(0), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func outputSince(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) < offset {
		return ""
	}
	return string(data[offset:])
}

// failOnRefusals fails t if the manager logs a request refused for lack of
// permission while t runs: each walkthrough is also a check that Deckhand's
// roles cover what the doc makes it do. Tests run one at a time, so the
// lines written between a test's start and its end are that test's.
func failOnRefusals(t *testing.T) {
	t.Helper()
	info, err := os.Stat(suite.output)
	if err != nil {
		t.Fatal(err)
	}
	offset := info.Size()
	t.Cleanup(func() {
		if lines := localcluster.ForbiddenLines(outputSince(suite.output, offset)); len(lines) > 0 {
			t.Errorf("the manager logged %d refused request(s) during this walkthrough:\n%s",
				len(lines), strings.Join(lines, "\n"))
		}
	})
}
