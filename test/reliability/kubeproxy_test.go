package reliability

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// endpointDelay is how long a change of a replica's readiness (or its
// death) takes to reach the proxy's endpoint list: the EndpointSlice
// controller and every kube-proxy take about this long, longer under load.
const endpointDelay = time.Second

// kubeProxy stands in for a Service as kube-proxy implements it: a TCP
// proxy on loopback that sends each new connection to the next endpoint of
// the list it was last given, round-robin, without retrying. A backend
// that refuses or resets the connection gets the client's connection
// closed, as a DNAT'd connection to a dead pod fails. The endpoint list
// follows each replica's /readyz (polled every 100ms, as the kubelet's
// probe and the EndpointSlice do) endpointDelay late: a replica that turns
// unready or dies stays in the list that long. A connection once made
// stays with its backend (conntrack) until either side closes it. TLS
// passes through untouched: every replica serves the suite's certificate.
type kubeProxy struct {
	ln   net.Listener
	stop chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	replicas  map[int]*endpoint // webhook port -> its state
	endpoints []int             // webhook ports, in the order they joined
	next      int
	open      map[int]int // backend port -> proxied connections now open
	served    map[int]int // backend port -> connections proxied in all
	refused   int         // connections sent to a backend that refused them
	dropped   int         // connections that came while the list was empty
	conns     map[net.Conn]struct{}
	closed    bool
}

// endpoint is one replica as the endpoint list knows it.
type endpoint struct {
	health int
	ready  bool      // in the endpoint list
	seen   bool      // readiness as last probed
	since  time.Time // when seen began to differ from ready
}

// startKubeProxy listens on a free loopback port until t ends.
func startKubeProxy(t *testing.T) *kubeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &kubeProxy{ln: ln, stop: make(chan struct{}), replicas: map[int]*endpoint{},
		open: map[int]int{}, served: map[int]int{}, conns: map[net.Conn]struct{}{}}
	p.wg.Add(2)
	go p.serve()
	go p.probe()
	t.Cleanup(p.Close)
	return p
}

// Port is where the proxy listens (the Service's address).
func (p *kubeProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Add makes a replica (a pod of the Service) known by its webhook port and
// its health port; it joins the endpoint list once it has been ready for
// endpointDelay.
func (p *kubeProxy) Add(d *localcluster.DeckhandProcess, webhookPort int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.replicas[webhookPort] = &endpoint{health: d.HealthPort}
}

// Endpoints is the endpoint list now.
func (p *kubeProxy) Endpoints() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.endpoints)
}

// Open is the number of proxied connections to backend open now.
func (p *kubeProxy) Open(backend int) int { p.mu.Lock(); defer p.mu.Unlock(); return p.open[backend] }

// Served is the number of connections proxied to backend so far.
func (p *kubeProxy) Served(backend int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served[backend]
}

// Failed is how many connections a listed backend refused, and how many
// came while no endpoint was listed.
func (p *kubeProxy) Failed() (refused, dropped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused, p.dropped
}

// waitEndpoints waits until the endpoint list is exactly ports.
func (p *kubeProxy) waitEndpoints(t *testing.T, ports ...int) {
	t.Helper()
	want := slices.Sorted(slices.Values(ports))
	testutil.Eventually(t, time.Minute, func(context.Context) (bool, error) {
		got := slices.Sorted(slices.Values(p.Endpoints()))
		return orErr(slices.Equal(got, want), fmt.Errorf("endpoints %v", got))
	}, "the endpoint list is %v", want)
}

// Close stops listening and probing and ends every proxied connection.
func (p *kubeProxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	close(p.stop)
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

// probe polls every replica's /readyz and moves a replica in or out of the
// endpoint list once its readiness has differed from the list for
// endpointDelay.
func (p *kubeProxy) probe() {
	defer p.wg.Done()
	client := &http.Client{Timeout: 500 * time.Millisecond}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		p.mu.Lock()
		health := map[int]int{}
		for port, e := range p.replicas {
			health[port] = e.health
		}
		p.mu.Unlock()
		seen := map[int]bool{}
		for port, h := range health {
			resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(h) + "/readyz")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			seen[port] = err == nil && resp.StatusCode == http.StatusOK
		}
		now := time.Now()
		p.mu.Lock()
		for port, ready := range seen {
			e := p.replicas[port]
			if ready != e.seen {
				e.seen, e.since = ready, now
			}
			if e.seen != e.ready && now.Sub(e.since) >= endpointDelay {
				e.ready = e.seen
				if e.ready {
					p.endpoints = append(p.endpoints, port)
				} else {
					p.endpoints = slices.DeleteFunc(p.endpoints, func(q int) bool { return q == port })
				}
			}
		}
		p.mu.Unlock()
	}
}

func (p *kubeProxy) serve() {
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

// pick returns the next endpoint in turn (0: the list is empty) and
// registers client as open (false: the proxy is closed).
func (p *kubeProxy) pick(client net.Conn) (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return 0, false
	}
	p.conns[client] = struct{}{}
	if len(p.endpoints) == 0 {
		p.dropped++
		return 0, true
	}
	p.next = (p.next + 1) % len(p.endpoints)
	return p.endpoints[p.next], true
}

func (p *kubeProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *kubeProxy) proxy(client net.Conn) {
	defer client.Close()
	port, ok := p.pick(client)
	if !ok {
		return
	}
	defer p.untrack(client)
	if port == 0 {
		return
	}
	backend, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 2*time.Second)
	p.mu.Lock()
	p.served[port]++
	if err != nil {
		p.refused++
		p.mu.Unlock()
		return
	}
	if p.closed {
		p.mu.Unlock()
		_ = backend.Close()
		return
	}
	p.conns[backend] = struct{}{}
	p.open[port]++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.open[port]--
		delete(p.conns, backend)
		p.mu.Unlock()
	}()

	// Either side ending ends both.
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
