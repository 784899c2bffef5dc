// Package metricstrigger_test runs RestartSchedule triggers against real
// metrics: a control plane whose fake nodes report simulated usage, served
// by metrics-server through the aggregation layer (localcluster
// Options.Metrics). It has a package of its own so that the main suite keeps
// a control plane with no metrics API.
package metricstrigger_test

import (
	"flag"
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	restartschedule "github.com/deckhand-dev/deckhand/internal/controller/restartschedule"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	restartschedulewebhook "github.com/deckhand-dev/deckhand/internal/webhook/restartschedule"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	opts := localcluster.Full(1)
	opts.Metrics = true
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Cluster: &opts,
		Setup: func(mgr ctrl.Manager) error {
			if err := (&restartschedule.Reconciler{PollInterval: 2 * time.Second}).SetupWithManager(mgr); err != nil {
				return err
			}
			return restartschedulewebhook.SetupWebhook(mgr, &restartschedulewebhook.Validator{MinInterval: time.Second})
		},
	}))
}

func needEnv(t *testing.T) {
	t.Helper()
	if env == nil {
		t.Skip("integration test: needs the local control plane (not with -short)")
	}
}
