package hostile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// suite is the cluster and the manager process every test shares.
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
	port      int // webhook port of the manager
}

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	s := testutil.NewSuite("hostile", 5*time.Minute)
	defer s.Close()
	fail, ctx := s.Fail, s.Ctx
	if err := s.Prepare(); err != nil {
		return fail("%v", err)
	}
	suite.root, suite.work = s.Root, s.Work
	var err error
	if suite.bin, err = localcluster.BuildDeckhand(ctx, suite.root, suite.work); err != nil {
		return fail("%v", err)
	}

	// etcd and kube-apiserver only: every test here is about what the
	// manager admits, stores or holds in memory, not about pods running.
	opts := localcluster.Options{Dir: filepath.Join(suite.work, "cluster")}
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
	// The ValidatingAdmissionPolicy a real installation has on the
	// manager's ServiceAccount: every test runs with the manager confined
	// to its own writes (privilege_test.go checks the confinement).
	if err := cluster.InstallAdmissionPolicy(ctx, suite.root); err != nil {
		return fail("installing the admission policy: %v", err)
	}
	suite.certDir = filepath.Join(suite.work, "webhook-certs")
	if suite.caPEM, err = localcluster.LocalWebhookCerts(suite.certDir); err != nil {
		return fail("%v", err)
	}
	if suite.port, err = localcluster.FreePort(); err != nil {
		return fail("%v", err)
	}
	hooks := localcluster.LocalWebhooks{
		ManifestPath: filepath.Join(suite.root, "config", "webhook", "manifests.yaml"),
		URL:          "https://127.0.0.1:" + strconv.Itoa(suite.port),
		CABundle:     suite.caPEM,
	}
	if err := hooks.Install(ctx, suite.clientset); err != nil {
		return fail("installing webhooks: %v", err)
	}
	suite.deckhand, err = cluster.StartDeckhand(ctx, localcluster.DeckhandOptions{
		Binary: suite.bin, WebhookPort: suite.port, CertDir: suite.certDir,
	})
	if err != nil {
		return fail("%v", err)
	}
	defer func() { suite.deckhand.Stop() }()

	code := m.Run()
	if lines := cluster.ManagerRefusals(); code == 0 && len(lines) > 0 {
		// Whatever the tests sent, the manager itself was never refused a
		// write, by RBAC or by the admission policy.
		fmt.Fprintf(os.Stderr, "hostile: the API server refused %d request(s) of the manager:\n%s\n", len(lines), strings.Join(lines, "\n"))
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "\n===== hostile: component logs (tests failed) =====\n%s\n", cluster.Logs(60))
		fmt.Fprintf(os.Stderr, "\n===== hostile: manager log =====\n%s\n", suite.deckhand.Logs(200))
	}
	return code
}

// ensureDeckhand makes sure the manager runs (a test that failed half-way,
// or a manager that a hostile input took down, may have left it exited).
func ensureDeckhand(t *testing.T) {
	t.Helper()
	if suite.deckhand.Exited() {
		t.Errorf("the manager had exited; its log:\n%s", suite.deckhand.Logs(80))
		if err := suite.deckhand.Restart(testutil.Context(t, 2*time.Minute)); err != nil {
			t.Fatalf("restarting deckhand: %v", err)
		}
	}
}

// ctx is a test's context, bounded by d.
func ctx(t *testing.T, d time.Duration) context.Context { return testutil.Context(t, d) }
