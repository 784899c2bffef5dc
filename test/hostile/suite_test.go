package hostile

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/deckhand-dev/deckhand/internal/test/processenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// suite is the cluster and the manager process every test shares.
var suite struct {
	*processenv.Env
	root string
}

func TestMain(m *testing.M) {
	os.Exit(testutil.RunSuite("hostile", 5*time.Minute, func(s *testutil.Suite) int { return runSuite(m, s) }))
}

func runSuite(m *testing.M, s *testutil.Suite) int {
	suite.root = s.Root
	// etcd and kube-apiserver only: every test here is about what the
	// manager admits, stores or holds in memory, not about pods running.
	// The admission policy a real installation has on the manager's
	// ServiceAccount: every test runs with the manager confined to its own
	// writes (privilege_test.go checks the confinement).
	env, err := processenv.Start(s, processenv.Options{AdmissionPolicy: true})
	if err != nil {
		return s.Fail("%v", err)
	}
	defer env.Stop()
	suite.Env = env

	code := m.Run()
	if lines := env.Cluster.ManagerRefusals(); code == 0 && len(lines) > 0 {
		// Whatever the tests sent, the manager itself was never refused a
		// write, by RBAC or by the admission policy.
		fmt.Fprintf(os.Stderr, "hostile: the API server refused %d request(s) of the manager:\n%s\n", len(lines), strings.Join(lines, "\n"))
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "\n===== hostile: component logs (tests failed) =====\n%s\n", env.Cluster.Logs(60))
		fmt.Fprintf(os.Stderr, "\n===== hostile: manager log =====\n%s\n", env.Deckhand.Logs(200))
	}
	return code
}

// ensureDeckhand makes sure the manager runs (a test that failed half-way,
// or a manager that a hostile input took down, may have left it exited).
func ensureDeckhand(t *testing.T) {
	t.Helper()
	if suite.Deckhand.Exited() {
		t.Errorf("the manager had exited; its log:\n%s", suite.Deckhand.Logs(80))
		if err := suite.Deckhand.Restart(testutil.Context(t, 2*time.Minute)); err != nil {
			t.Fatalf("restarting deckhand: %v", err)
		}
	}
}

// ctx is a test's context, bounded by d.
func ctx(t *testing.T, d time.Duration) context.Context { return testutil.Context(t, d) }
