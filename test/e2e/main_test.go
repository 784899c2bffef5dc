package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/localcluster"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// suite is the cluster and manager every test in this package shares.
var suite struct {
	cluster   *localcluster.Cluster
	deckhand  *localcluster.DeckhandProcess
	client    client.Client
	clientset kubernetes.Interface
}

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, err := localcluster.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	work, err := os.MkdirTemp("", "deckhand-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(work)

	// Build the manager from this tree so a stale bin/deckhand can never be tested.
	bin := filepath.Join(work, "deckhand")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/deckhand")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building deckhand: %v\n", err)
		return 1
	}

	cluster, err := localcluster.Start(ctx, localcluster.Full(2))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-sigs; ok {
			cluster.Stop()
			os.Exit(1)
		}
	}()
	defer signal.Stop(sigs)

	if err := localcluster.InstallCRDs(cluster.Config, filepath.Join(root, "config", "crd", "bases")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	certDir := filepath.Join(work, "webhook-certs")
	ca, err := localcluster.LocalWebhookCerts(certDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	port, err := localcluster.FreePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	hooks := localcluster.LocalWebhooks{
		ManifestPath: filepath.Join(root, "config", "webhook", "manifests.yaml"),
		URL:          "https://127.0.0.1:" + strconv.Itoa(port),
		CABundle:     ca,
	}
	if err := hooks.Install(ctx, cluster.Clientset()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	deckhand, err := cluster.StartDeckhand(ctx, localcluster.DeckhandOptions{
		Binary: bin, WebhookPort: port, CertDir: certDir,
		Args: []string{"--leader-elect=false", "--zap-log-level=debug"},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer deckhand.Stop()

	suite.cluster, suite.deckhand, suite.clientset = cluster, deckhand, cluster.Clientset()
	if suite.client, err = client.New(cluster.Config, client.Options{Scheme: testenv.Scheme()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "\n===== e2e: component logs (tests failed) =====\n%s\n", cluster.Logs(80))
	}
	return code
}
