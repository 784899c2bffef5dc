package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// process is one control-plane component running as a child process with
// its output in a log file of its own.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{}
	waitErr error
}

// startProcess starts bin with args, output to dir/<name>.log. The child gets
// its own process group (so that stopping it stops anything it spawned) and
// is killed by the kernel if this process dies first.
func startProcess(dir, name, bin string, args []string, env []string) (*process, error) {
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = ChildProcAttr(syscall.SIGKILL)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// stop asks the process group to terminate and kills it after grace.
func (p *process) stop(grace time.Duration) {
	if ok, _ := p.exited(); ok {
		return
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
}

// kill ends the process group at once, as a crash would.
func (p *process) kill() {
	if ok, _ := p.exited(); ok {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string {
	return tailFile(p.logPath, n)
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// Ports are handed out at most once per process, so two components started
// back to back never get the same one.
func FreePort() (int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !usedPorts[port] {
			usedPorts[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no free loopback port found")
}

var (
	portMu    sync.Mutex
	usedPorts = map[int]bool{}
)

// copyLogs writes every log file in dir, last n lines each, to w.
func copyLogs(w io.Writer, dir string, n int) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".log") {
			continue
		}
		fmt.Fprintf(w, "----- %s (last %d lines) -----\n%s\n", e.Name(), n, tailFile(filepath.Join(dir, e.Name()), n))
	}
}

// StopOnInterrupt calls stop and exits with status 1 when the process gets
// SIGINT or SIGTERM (a Ctrl-C, or `go test -timeout` ending a test binary),
// so that no control-plane process outlives the run. release stops
// listening; call it once the normal clean-up has taken over.
func StopOnInterrupt(stop func()) (release func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-sigs; ok {
			stop()
			os.Exit(1)
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(sigs)
	}
}
