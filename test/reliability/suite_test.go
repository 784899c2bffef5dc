package reliability

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// suite is the cluster and the manager process every test shares. Tests
// run one after the other: some of them kill or replace the manager.
var suite struct {
	root      string
	work      string
	bin       string
	cluster   *localcluster.Cluster
	deckhand  *localcluster.DeckhandProcess
	client    client.Client
	clientset kubernetes.Interface
	certDir   string
	caPEM     []byte
	port      int // webhook port of the main manager
	stress    bool
}

// stress reports whether the long versions run (DECKHAND_STRESS=1).
func stress() bool { return suite.stress }

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	suite.stress = os.Getenv("DECKHAND_STRESS") == "1"
	s := testutil.NewSuite("reliability", 5*time.Minute)
	defer s.Close()
	fail, ctx := s.Fail, s.Ctx
	if err := s.Prepare(); err != nil {
		return fail("%v", err)
	}
	suite.root, suite.work = s.Root, s.Work
	var err error

	// The manager under test is built from this tree.
	if suite.bin, err = localcluster.BuildDeckhand(ctx, suite.root, suite.work); err != nil {
		return fail("%v", err)
	}

	// Two fake nodes; kube-controller-manager for garbage collection and
	// Deployments (WebServer, RestartSchedule targets).
	opts := localcluster.Full(2)
	opts.Dir = filepath.Join(suite.work, "cluster")
	cluster, err := localcluster.Start(ctx, opts)
	if err != nil {
		return fail("%v", err)
	}
	defer cluster.Stop()
	defer localcluster.StopOnInterrupt(cluster.Stop)()
	suite.cluster, suite.clientset = cluster, cluster.Clientset()
	if suite.client, err = client.New(cluster.Config, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return fail("%v", err)
	}
	if err := localcluster.InstallCRDs(cluster.Config, filepath.Join(suite.root, "config", "crd", "bases")); err != nil {
		return fail("installing CRDs: %v", err)
	}
	suite.certDir = filepath.Join(suite.work, "webhook-certs")
	if suite.caPEM, err = localcluster.LocalWebhookCerts(suite.certDir); err != nil {
		return fail("%v", err)
	}
	if suite.port, err = localcluster.FreePort(); err != nil {
		return fail("%v", err)
	}
	if err := installWebhooks(ctx, suite.port); err != nil {
		return fail("installing webhooks: %v", err)
	}
	// The certificates are the harness's (LocalWebhookCerts), so the
	// manager runs with --cert-management=external (StartDeckhand's
	// default). Leader election is off for the main manager so that a
	// SIGKILLed one comes back at once (leader failover has a test of its own).
	suite.deckhand, err = cluster.StartDeckhand(ctx, localcluster.DeckhandOptions{
		Binary: suite.bin, WebhookPort: suite.port, CertDir: suite.certDir,
		// Short @every schedules keep the RestartSchedule runs quick.
		Args: []string{"--leader-elect=false", "--restart-schedule-min-interval=1s"},
	})
	if err != nil {
		return fail("%v", err)
	}
	defer func() { suite.deckhand.Stop() }()

	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "\n===== reliability: component logs (tests failed) =====\n%s\n", cluster.Logs(60))
	}
	return code
}

// installWebhooks points Deckhand's webhook configurations at the manager
// listening on port.
func installWebhooks(ctx context.Context, port int) error {
	hooks := localcluster.LocalWebhooks{
		ManifestPath: filepath.Join(suite.root, "config", "webhook", "manifests.yaml"),
		URL:          "https://127.0.0.1:" + strconv.Itoa(port),
		CABundle:     suite.caPEM,
	}
	return hooks.Install(ctx, suite.clientset)
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
