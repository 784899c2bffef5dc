package shutdown

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// ErrDraining is the readiness failure of a replica that is stopping.
var ErrDraining = errors.New("shutting down: draining before the stop")

// Drain is a planned stop. Admission webhook calls are POSTs, which the API
// server does not retry when a connection is refused or reset: a replica
// that stopped serving while an endpoint list still named it would fail
// the calls sent to it (a pod webhook with failurePolicy Ignore admits the
// pod without its sidecars). So a replica told to stop keeps serving for
// the drain period after it has marked itself unready, and its endpoint is
// removed everywhere in the meantime.
type Drain struct {
	period   time.Duration
	clock    clock.Clock
	onDrain  []func()
	draining atomic.Bool
}

// New returns a Drain of period; onDrain run when the drain begins.
func New(period time.Duration, onDrain ...func()) *Drain {
	return &Drain{period: period, clock: clock.RealClock{}, onDrain: onDrain}
}

// Checker is a readiness check that fails once the drain has begun.
func (d *Drain) Checker(*http.Request) error {
	if d.draining.Load() {
		return ErrDraining
	}
	return nil
}

// SignalContext returns a context that ends one drain period after the
// first SIGTERM or SIGINT. A second signal ends the process at once
// (status 1), as controller-runtime's signal handler does.
func (d *Drain) SignalContext(log logr.Logger) context.Context {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	return d.context(sigs, log, func() { os.Exit(1) })
}

// context is SignalContext for the signals of sigs, calling exit on the
// second one.
func (d *Drain) context(sigs <-chan os.Signal, log logr.Logger, exit func()) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		sig := <-sigs
		d.draining.Store(true)
		for _, f := range d.onDrain {
			f()
		}
		log.Info("draining: readiness fails and webhooks are still served until the drain period ends", "signal", sig.String(), "drain", d.period)
		select {
		case <-d.clock.After(d.period):
			log.Info("drain period over: stopping")
		case sig := <-sigs:
			log.Info("second signal: stopping at once", "signal", sig.String())
			exit()
		}
		cancel()
	}()
	return ctx
}
