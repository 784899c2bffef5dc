package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// Names dist/install.yaml gives Deckhand's objects.
const (
	systemNamespace   = "deckhand-system"
	managerSA         = "deckhand-controller-manager"
	certSecret        = "deckhand-webhook-server-cert"
	mutatingConfig    = "deckhand-mutating-webhook-configuration"
	validatingConfig  = "deckhand-validating-webhook-configuration"
	managerDeployment = "deckhand-controller-manager"
	metricsReaderRole = "deckhand-metrics-reader"
)

// Certificate settings of the manager under test: the serving certificate
// lives 40s and is renewed once it would expire within 30s, checked every
// 2s, so it is rotated about every 10s throughout the suite while every
// test runs. The CA keeps the default (10 years) until TestCertificateRotation
// forces it near expiry.
var certArgs = []string{
	"--cert-validity=40s",
	"--cert-rotation-lookahead=30s",
	"--cert-rotation-check-interval=2s",
}

// suite is the cluster and manager every test in this package shares.
var suite struct {
	cluster  *localcluster.Cluster
	deckhand *localcluster.DeckhandProcess
	// client and clientset are cluster-admin; tests act as a user would.
	client    client.Client
	clientset kubernetes.Interface
	// saConfig, saClient and saClientset authenticate as the manager's
	// ServiceAccount (a TokenRequest token): the identity the manager runs with.
	saConfig    *rest.Config
	saClient    client.Client
	saClientset kubernetes.Interface

	root        string
	binary      string
	kubectl     string
	installer   string
	webhookPort int
	install     installRecord
}

// installRecord is what TestMain saw while installing dist/install.yaml
// (twice); TestInstallYAML asserts on it.
type installRecord struct {
	first, second       string            // kubectl output
	before, after       map[string]string // object -> generation or resourceVersion
	diffOut             string
	diffErr             error
	manifestObjectCount int
}

func TestMain(m *testing.M) {
	os.Exit(testutil.RunSuite("e2e", 5*time.Minute, func(s *testutil.Suite) int { return runSuite(m, s) }))
}

func runSuite(m *testing.M, s *testutil.Suite) int {
	fail, ctx, root, work := s.Fail, s.Ctx, s.Root, s.Work

	// Build the manager from this tree so a stale bin/deckhand can never be tested.
	bin, err := localcluster.BuildDeckhand(ctx, root, work)
	if err != nil {
		return fail("%v", err)
	}

	cluster, err := localcluster.Start(ctx, localcluster.Full(2))
	if err != nil {
		return fail("%v", err)
	}
	defer cluster.Stop()
	defer localcluster.StopOnInterrupt(cluster.Stop)()

	suite.cluster, suite.clientset, suite.root, suite.binary = cluster, cluster.Clientset(), root, bin
	suite.kubectl = filepath.Join(cluster.BinDir(), "kubectl")
	suite.installer = filepath.Join(root, "dist", "install.yaml")
	if suite.client, err = client.New(cluster.Config, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return fail("%v", err)
	}

	// 1. Install as a user would: one server-side apply of dist/install.yaml,
	//    then the same again (TestInstallYAML checks it changed nothing).
	if err := installTwice(ctx); err != nil {
		return fail("%v", err)
	}

	// 2. The manager runs on this host, so the webhook configurations call
	//    https://localhost:<port>/<path> instead of the in-cluster Service
	//    (nothing here can route to a Service). Their caBundle stays empty:
	//    the manager's own certificate rotation fills it.
	if suite.webhookPort, err = localcluster.FreePort(); err != nil {
		return fail("%v", err)
	}
	if err := cluster.PointWebhooksAt(ctx, "https://localhost:"+strconv.Itoa(suite.webhookPort), "e2e"); err != nil {
		return fail("pointing the webhooks at the host: %v", err)
	}

	// 3. The manager's identity: a token for its ServiceAccount from the
	//    TokenRequest API, in a kubeconfig of its own.
	saKubeconfig := filepath.Join(work, "deckhand-sa.kubeconfig")
	if _, err := cluster.WriteServiceAccountKubeconfig(ctx, saKubeconfig, systemNamespace, managerSA, 2*time.Hour); err != nil {
		return fail("service-account kubeconfig: %v", err)
	}
	if suite.saConfig, err = clientcmd.BuildConfigFromFlags("", saKubeconfig); err != nil {
		return fail("%v", err)
	}
	if suite.saClient, err = client.New(suite.saConfig, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return fail("%v", err)
	}
	if suite.saClientset, err = kubernetes.NewForConfig(suite.saConfig); err != nil {
		return fail("%v", err)
	}

	// 4. The deckhand binary with that identity, leader election in its own
	//    namespace (the leader-election Role), certificates managed by itself
	//    in deckhand-system/deckhand-webhook-server-cert, issued for
	//    "localhost" too. The certificate directory starts empty.
	args := append([]string{
		"--leader-elect=true",
		"--leader-election-namespace=" + systemNamespace,
		"--cert-management=self",
		"--cert-secret-namespace=" + systemNamespace,
		"--cert-extra-dns-names=localhost",
		// Short @every schedules keep the RestartSchedule tests quick.
		"--restart-schedule-min-interval=1s",
	}, certArgs...)
	deckhand, err := cluster.StartDeckhand(ctx, localcluster.DeckhandOptions{
		Binary: bin, Kubeconfig: saKubeconfig, WebhookPort: suite.webhookPort,
		CertDir: filepath.Join(work, "webhook-certs"),
		Args:    args,
	})
	if err != nil {
		return fail("%v", err)
	}
	defer deckhand.Stop()
	suite.deckhand = deckhand

	code := m.Run()
	if code == 0 {
		// Sufficiency of the ClusterRole, over the whole suite: the manager
		// was never refused anything it tried.
		if lines := suite.cluster.ManagerRefusals(); len(lines) > 0 {
			fmt.Fprintf(os.Stderr, "e2e: the manager was refused %d API request(s) under its own identity:\n%s\n",
				len(lines), strings.Join(lines, "\n"))
			code = 1
		}
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "\n===== e2e: component logs (tests failed) =====\n%s\n", cluster.Logs(80))
	}
	return code
}

// installTwice applies dist/install.yaml with kubectl's server-side apply,
// records every object's generation (or resourceVersion), applies it again
// and records them again.
func installTwice(ctx context.Context) error {
	var err error
	rec := &suite.install
	if rec.first, err = kubectl(ctx, "apply", "--server-side", "-f", suite.installer); err != nil {
		return fmt.Errorf("first apply of dist/install.yaml: %w", err)
	}
	// The CRDs must be served before anything uses them.
	if _, err := kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s", "crd", "-l", "app.kubernetes.io/part-of=deckhand"); err != nil {
		return err
	}
	if rec.before, err = objectVersions(ctx); err != nil {
		return err
	}
	if rec.second, err = kubectl(ctx, "apply", "--server-side", "-f", suite.installer); err != nil {
		return fmt.Errorf("second apply of dist/install.yaml: %w", err)
	}
	if rec.after, err = objectVersions(ctx); err != nil {
		return err
	}
	rec.diffOut, rec.diffErr = kubectl(ctx, "diff", "--server-side", "-f", suite.installer)
	return nil
}

// kubectl runs bin/k8s/kubectl as the cluster admin.
func kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, suite.kubectl, append([]string{"--kubeconfig", suite.cluster.KubeconfigPath}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// objectVersions maps every object of dist/install.yaml to its generation
// when it has one (status updates by controllers do not change it), else
// to its resourceVersion.
func objectVersions(ctx context.Context) (map[string]string, error) {
	out, err := kubectl(ctx, "get", "-f", suite.installer, "-o",
		`jsonpath={range .items[*]}{.kind}/{.metadata.namespace}/{.metadata.name}={.metadata.generation},{.metadata.resourceVersion}{"\n"}{end}`)
	if err != nil {
		return nil, err
	}
	versions := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		key, val, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		gen, rv, _ := strings.Cut(val, ",")
		if gen != "" {
			versions[key] = "generation " + gen
		} else {
			versions[key] = "resourceVersion " + rv
		}
	}
	suite.install.manifestObjectCount = len(versions)
	return versions, nil
}
