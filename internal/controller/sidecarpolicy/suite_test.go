package sidecarpolicy_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/operator"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

var env *testenv.Env

// webhooksOnly, when set, makes the next manager serve the webhooks and run
// no controller: a manager whose controllers are down while its admission
// webhooks still answer (a SidecarSet can be changed, nothing reconciles).
var webhooksOnly atomic.Bool

// policyAPIServed, when false, makes the next manager believe the API
// server does not serve MutatingAdmissionPolicies.
var policyAPIServed atomic.Bool

// policyInjectionOff, when set, makes the next manager run without
// --sidecarset-policy-injection (the default install's mode).
var policyInjectionOff atomic.Bool

// withoutPodWebhook, when set, makes the next manager run as
// --sidecarset-pod-webhook=false --sidecarset-injection-mode=Policy.
var withoutPodWebhook atomic.Bool

// The whole of Deckhand, as the binary runs it, on an API server only (the
// pods need not run): the pod webhook, the SidecarSet controllers and the
// policy controller, under the manager's ServiceAccount.
func TestMain(m *testing.M) {
	policyAPIServed.Store(true)
	os.Exit(testenv.Run(m, &env, testenv.Options{
		// kube-controller-manager collects the policies of deleted
		// SidecarSets (and creates the pods' ServiceAccounts).
		Cluster: &localcluster.Options{ControllerManager: true},
		Setup: func(mgr ctrl.Manager) error {
			opts := operator.DefaultOptions()
			opts.SidecarSetPolicyInjection = !policyInjectionOff.Load()
			if !policyAPIServed.Load() {
				opts.PolicyAPIServed = new(bool)
			}
			if withoutPodWebhook.Load() {
				opts.SidecarSetPodWebhook = false
				opts.SidecarSetInjectionMode = deckhandv1alpha1.PolicyInjection
			}
			if webhooksOnly.Load() {
				_, err := testenv.SidecarSetWebhooks(mgr, sidecarcontrol.Options{
					Modes: sidecarcontrol.Modes{Default: opts.SidecarSetInjectionMode, PolicyServed: policyAPIServed.Load()},
				})
				return err
			}
			return operator.Setup(mgr, opts)
		},
	}))
}

func ctxT(t *testing.T) context.Context { return testutil.Context(t, 2*time.Minute) }

// restartManagerWith restarts the manager with flag set to value for the
// rest of the test; the next test finds it running with flag as it was.
func restartManagerWith(t *testing.T, flag *atomic.Bool, value bool) {
	t.Helper()
	restoreManagerAtEnd(t, flag)
	if err := restartManager(flag, value); err != nil {
		t.Fatal(err)
	}
}

// restoreManagerAtEnd makes sure that, whatever the test does to the
// manager, the next test finds it running with flag as it is now.
func restoreManagerAtEnd(t *testing.T, flag *atomic.Bool) {
	old := flag.Load()
	t.Cleanup(func() {
		if err := restartManager(flag, old); err != nil {
			t.Error(err)
		}
	})
}

// restartManager stops the manager (if it runs) and starts it with flag
// set to value.
func restartManager(flag *atomic.Bool, value bool) error {
	env.StopManager()
	flag.Store(value)
	if _, err := env.StartManager(); err != nil {
		return fmt.Errorf("restarting the manager: %w", err)
	}
	return nil
}
