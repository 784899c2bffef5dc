package reliability

import (
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// serviceProxy stands in for the Service in front of several manager
// replicas: a TCP proxy on loopback that spreads incoming connections over
// the replicas' webhook ports in turn. TLS passes through untouched, so
// every replica must serve a certificate valid for 127.0.0.1 (they share the
// suite's cert dir). A replica that refuses a connection is skipped, as
// kube-proxy skips an endpoint that is gone; connections already proxied
// to a replica end when it dies, as they do behind a Service.
type serviceProxy struct {
	ln net.Listener

	mu       sync.Mutex
	backends []int
	next     int
	open     map[int]int // backend port -> proxied connections now open
	served   map[int]int // backend port -> connections proxied in all
	skipped  int         // connections a refusing backend did not take
	dropped  int         // connections no backend took
	conns    map[net.Conn]struct{}
	closed   bool
	wg       sync.WaitGroup
}

// startServiceProxy listens on a free loopback port until t ends.
func startServiceProxy(t *testing.T, backends ...int) *serviceProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &serviceProxy{ln: ln, open: map[int]int{}, served: map[int]int{}, conns: map[net.Conn]struct{}{}}
	p.SetBackends(backends...)
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// Port is where the proxy listens.
func (p *serviceProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// SetBackends replaces the replicas' ports (the Service's endpoints).
func (p *serviceProxy) SetBackends(ports ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends = append([]int(nil), ports...)
}

// Open is the number of proxied connections to backend that are open now.
func (p *serviceProxy) Open(backend int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open[backend]
}

// Served is the number of connections proxied to backend so far.
func (p *serviceProxy) Served(backend int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served[backend]
}

// Skipped and Dropped count the connections a refusing backend did not
// take (and another one did), and those no backend took.
func (p *serviceProxy) Skipped() (skipped, dropped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.skipped, p.dropped
}

// Close stops listening and ends every proxied connection.
func (p *serviceProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *serviceProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.proxy(c)
		}()
	}
}

// order returns the backends to try for the next connection: the next one
// in turn first, then the others.
func (p *serviceProxy) order() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.backends)
	out := make([]int, 0, n)
	for i := range n {
		out = append(out, p.backends[(p.next+i)%n])
	}
	if n > 0 {
		p.next = (p.next + 1) % n
	}
	return out
}

// track registers c as open (or, with add false, closed); it reports false
// when the proxy is closed.
func (p *serviceProxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.conns, c)
		return true
	}
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *serviceProxy) proxy(client net.Conn) {
	if !p.track(client, true) {
		_ = client.Close()
		return
	}
	defer p.track(client, false)
	defer client.Close()
	var backend net.Conn
	var port int
	for i, b := range p.order() {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(b)), 2*time.Second)
		if err == nil {
			backend, port = c, b
			if i > 0 {
				p.mu.Lock()
				p.skipped++
				p.mu.Unlock()
			}
			break
		}
	}
	if backend == nil {
		p.mu.Lock()
		p.dropped++
		p.mu.Unlock()
		return
	}
	p.track(backend, true)
	defer p.track(backend, false)
	p.mu.Lock()
	p.open[port]++
	p.served[port]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.open[port]--
		p.mu.Unlock()
	}()

	// Either side ending ends both, as a dead endpoint's connections end.
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(backend, client)
	go pipe(client, backend)
	<-done
	_ = backend.Close()
	_ = client.Close()
	<-done
}

// waitClosed waits until no proxied connection to backend is open: the
// connections of a killed replica have all ended.
func (p *serviceProxy) waitClosed(ctx context.Context, backend int) error {
	return wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return p.Open(backend) == 0, nil
	})
}
