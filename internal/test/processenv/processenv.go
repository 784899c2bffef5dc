// Package processenv starts what the suites that test the deckhand binary
// as its own process share (test/hostile, test/reliability): a local control
// plane with Deckhand's CRDs and webhook configurations, and the manager
// built from this tree serving them, as testenv does for an in-process
// manager.
package processenv

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testenv"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// Options says what differs between the suites.
type Options struct {
	// Cluster is the control plane to start; its Dir defaults to a folder
	// of the suite's scratch directory.
	Cluster localcluster.Options
	// AdmissionPolicy installs the ValidatingAdmissionPolicy a real
	// installation puts on the manager's ServiceAccount before the
	// manager starts, so that it runs confined to its own writes.
	AdmissionPolicy bool
	// Args are the manager's extra flags.
	Args []string
}

// Env is the running cluster and manager. The manager's webhook serving
// certificates are the harness's (localcluster.LocalWebhookCerts), so it
// runs with --cert-management=external, StartDeckhand's default.
type Env struct {
	// Binary is the deckhand executable built from the tree.
	Binary   string
	Cluster  *localcluster.Cluster
	Deckhand *localcluster.DeckhandProcess
	// Client and Clientset are cluster-admin.
	Client    client.Client
	Clientset kubernetes.Interface
	// CertDir holds the webhook serving certificate and CAPEM its CA.
	CertDir string
	CAPEM   []byte
	// WebhookPort is the port the manager serves its webhooks on.
	WebhookPort int

	root          string
	stopInterrupt func()
}

// Start builds the manager, starts the cluster, installs the CRDs, the
// webhook configurations (pointed at the host) and, if asked, the
// admission policy, then starts the manager. On error everything started
// so far is stopped again; otherwise Stop stops it all.
func Start(s *testutil.Suite, opts Options) (env *Env, err error) {
	ctx := s.Ctx
	env = &Env{root: s.Root}
	// The manager under test is always built from this tree, so a stale
	// bin/deckhand can never be what is tested.
	if env.Binary, err = localcluster.BuildDeckhand(ctx, s.Root, s.Work); err != nil {
		return nil, err
	}
	if opts.Cluster.Dir == "" {
		opts.Cluster.Dir = filepath.Join(s.Work, "cluster")
	}
	if env.Cluster, err = localcluster.Start(ctx, opts.Cluster); err != nil {
		return nil, err
	}
	env.stopInterrupt = localcluster.StopOnInterrupt(env.Cluster.Stop)
	defer func() {
		if err != nil {
			env.Stop()
			env = nil
		}
	}()
	env.Clientset = env.Cluster.Clientset()
	if env.Client, err = client.New(env.Cluster.Config, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return env, err
	}
	if err := localcluster.InstallCRDs(env.Cluster.Config, filepath.Join(s.Root, "config", "crd", "bases")); err != nil {
		return env, fmt.Errorf("installing CRDs: %w", err)
	}
	if opts.AdmissionPolicy {
		if err := env.Cluster.InstallAdmissionPolicy(ctx, s.Root); err != nil {
			return env, fmt.Errorf("installing the admission policy: %w", err)
		}
	}
	env.CertDir = filepath.Join(s.Work, "webhook-certs")
	if env.CAPEM, err = localcluster.LocalWebhookCerts(env.CertDir); err != nil {
		return env, err
	}
	if env.WebhookPort, err = localcluster.FreePort(); err != nil {
		return env, err
	}
	if err := env.InstallWebhooks(ctx, env.WebhookPort); err != nil {
		return env, fmt.Errorf("installing webhooks: %w", err)
	}
	env.Deckhand, err = env.Cluster.StartDeckhand(ctx, localcluster.DeckhandOptions{
		Binary: env.Binary, WebhookPort: env.WebhookPort, CertDir: env.CertDir, Args: opts.Args,
	})
	return env, err
}

// InstallWebhooks points Deckhand's webhook configurations at whatever
// listens on port of this host, trusting the harness's CA.
func (e *Env) InstallWebhooks(ctx context.Context, port int) error {
	hooks := localcluster.LocalWebhooks{
		ManifestPath: filepath.Join(e.root, "config", "webhook", "manifests.yaml"),
		URL:          "https://127.0.0.1:" + strconv.Itoa(port),
		CABundle:     e.CAPEM,
	}
	return hooks.Install(ctx, e.Clientset)
}

// StartReplica starts another manager process from the same binary and
// serving certificate, with opts saying how it differs (Name, WebhookPort,
// Args, Env), and stops it when t ends.
func (e *Env) StartReplica(t testing.TB, opts localcluster.DeckhandOptions) *localcluster.DeckhandProcess {
	t.Helper()
	opts.Binary, opts.CertDir = e.Binary, e.CertDir
	d, err := e.Cluster.StartDeckhand(testutil.Context(t, 3*time.Minute), opts)
	if err != nil {
		t.Fatalf("starting %s: %v", opts.Name, err)
	}
	t.Cleanup(d.Stop)
	return d
}

// Stop stops the manager (whichever process Deckhand holds by then, after
// a restart too), then the cluster.
func (e *Env) Stop() {
	if e.Deckhand != nil {
		e.Deckhand.Stop()
	}
	e.stopInterrupt()
	e.Cluster.Stop()
}
