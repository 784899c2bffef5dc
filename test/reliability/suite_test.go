package reliability

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/processenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// suite is the cluster and the manager process every test shares. Tests
// run one after the other: some of them kill or replace the manager.
var suite struct {
	env       *processenv.Env
	bin       string
	cluster   *localcluster.Cluster
	deckhand  *localcluster.DeckhandProcess
	client    client.Client
	clientset kubernetes.Interface
	certDir   string
	port      int // webhook port of the main manager
	stress    bool
}

// stress reports whether the long versions run (DECKHAND_STRESS=1).
func stress() bool { return suite.stress }

// scaled is normal, or stressed in the long versions.
func scaled(normal, stressed int) int {
	if stress() {
		return stressed
	}
	return normal
}

func TestMain(m *testing.M) {
	os.Exit(testutil.RunSuite("reliability", 5*time.Minute, func(s *testutil.Suite) int { return runSuite(m, s) }))
}

func runSuite(m *testing.M, s *testutil.Suite) int {
	suite.stress = os.Getenv("DECKHAND_STRESS") == "1"
	// Two fake nodes; kube-controller-manager for garbage collection and
	// Deployments (WebServer, RestartSchedule targets). Leader election is
	// on, as in production: a SIGKILLed manager's successor reconciles only
	// once the Lease the killed one held has expired (chaos waits for it).
	env, err := processenv.Start(s, processenv.Options{
		Cluster: localcluster.Full(2),
		// Short @every schedules keep the RestartSchedule runs quick. An
		// 8s Lease (production: 15s) shortens each kill's wait for the
		// successor, which dominates the crash scenarios' time; the
		// successor still starts cold and takes over only on expiry.
		Args: []string{"--leader-elect=true", "--restart-schedule-min-interval=1s",
			"--leader-election-lease-duration=8s", "--leader-election-renew-deadline=6s"},
	})
	if err != nil {
		return s.Fail("%v", err)
	}
	defer env.Stop()
	suite.env, suite.bin, suite.cluster, suite.deckhand = env, env.Binary, env.Cluster, env.Deckhand
	suite.client, suite.clientset, suite.certDir, suite.port = env.Client, env.Clientset, env.CertDir, env.WebhookPort

	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "\n===== reliability: component logs (tests failed) =====\n%s\n", env.Cluster.Logs(60))
	}
	return code
}

// installWebhooks points Deckhand's webhook configurations at the manager
// listening on port.
func installWebhooks(ctx context.Context, port int) error {
	return suite.env.InstallWebhooks(ctx, port)
}

// ensureDeckhand makes sure the main manager runs (a test that failed
// half-way may have left it killed).
func ensureDeckhand(t *testing.T) {
	t.Helper()
	if suite.deckhand.Exited() {
		if err := suite.deckhand.Restart(testutil.Context(t, 2*time.Minute)); err != nil {
			t.Fatalf("restarting deckhand: %v", err)
		}
	}
}

// figures collects the numbers docs/reliability.md records. They are
// logged, and appended to $DECKHAND_RELIABILITY_REPORT when set.
var figuresMu sync.Mutex

func figure(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf("%s: %s", t.Name(), fmt.Sprintf(format, args...))
	t.Log(line)
	path := os.Getenv("DECKHAND_RELIABILITY_REPORT")
	if path == "" {
		return
	}
	figuresMu.Lock()
	defer figuresMu.Unlock()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Logf("writing figures: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339), line)
}
