package sidecarset_test

import (
	"os"
	"sync"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	sidecarsetctrl "github.com/deckhand-dev/deckhand/internal/controller/sidecarset"
	"github.com/deckhand-dev/deckhand/internal/expectations"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
)

var env *testenv.Env

// expectClock is the clock of the controller's expectations: real time
// plus an offset a test can move forward, so that a test can let the TTL
// pass without waiting for it while every other test sees real time.
var expectClock = &offsetClock{}

// updateExpectations are the running controller's expectations, so that a
// test can raise one the cache will never confirm. Each manager start gets
// new ones, as a restarted process would.
var updateExpectations *expectations.Expectations

// suiteLister is the Lister the controller and the webhooks share.
var suiteLister *sidecarcontrol.Lister

type offsetClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *offsetClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// The controller tests run a full cluster: kube-controller-manager (for
// Deployments), the scheduler and kwok, which makes scheduled pods Running
// and Ready.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Full: true,
		Setup: func(mgr ctrl.Manager) error {
			updateExpectations = expectations.New(expectations.WithClock(expectClock))
			// One Lister for the controller and the webhook, as operator.Setup wires them.
			allow, err := sidecarcontrol.ParseMetadataAllowlist([]string{podMetadataAllowlist})
			if err != nil {
				return err
			}
			lister, err := testenv.SidecarSetWebhooks(mgr, sidecarcontrol.Options{
				PodMetadata: sidecarcontrol.PodMetadataAllowlists{Annotations: allow, Labels: allow},
				Revisions:   mgr,
			})
			if err != nil {
				return err
			}
			suiteLister = lister
			return (&sidecarsetctrl.Reconciler{Expectations: updateExpectations, Lister: lister}).SetupWithManager(mgr)
		},
	}))
}
