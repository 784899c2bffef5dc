// Package rolloutwatch_test runs `kubectl deckhand status --watch` on
// PodSets that Deckhand's PodSet controller and webhook manage, in an
// in-process manager against a real kube-apiserver and etcd. With no
// scheduler and no kubelet, pods stay Pending unless a test marks them
// ready as a kubelet would.
package rolloutwatch_test

import (
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	podsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/podset"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{
		Setup: func(mgr ctrl.Manager) error {
			if err := (&podset.Reconciler{}).SetupWithManager(mgr); err != nil {
				return err
			}
			return podsetwebhook.SetupWebhookWithManager(mgr)
		},
	}))
}
