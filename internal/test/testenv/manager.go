package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/deckhand-dev/deckhand/internal/operator"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

// Manager is an in-process manager started by the environment.
type Manager struct {
	ctrl.Manager
	cancel context.CancelFunc
	done   chan error
}

// StartManager starts a new in-process manager with the package's Setup,
// waits until its caches are synced and its webhook server answers, and
// (the first time) installs the webhook configurations for the paths it
// serves. It fails if a manager is already running.
func (e *Env) StartManager() (*Manager, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.setup == nil {
		return nil, fmt.Errorf("testenv: no Setup given")
	}
	if e.manager != nil {
		return nil, fmt.Errorf("testenv: a manager is already running")
	}
	served := &servedPaths{paths: map[string]bool{}}
	hookServer := &recordingServer{Server: webhook.NewServer(webhook.Options{
		Host: "127.0.0.1", Port: e.webhookPort, CertDir: e.certDir,
	}), served: served}
	mgr, err := ctrl.NewManager(e.ManagerConfig, ctrl.Options{
		Scheme:                 e.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          hookServer,
		Cache:                  operator.CacheOptions(),
		// Tests start managers again in the same process; controller names
		// would otherwise collide with those of the stopped manager.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	if err := e.setup(mgr); err != nil {
		return nil, fmt.Errorf("testenv: setup: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{Manager: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()

	syncCtx, syncCancel := context.WithTimeout(ctx, 60*time.Second)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		cancel()
		return nil, fmt.Errorf("testenv: manager caches did not sync: %v", drain(m.done))
	}
	if served.count() > 0 {
		if err := localcluster.WaitTLS(syncCtx, e.webhookPort, 30*time.Second); err != nil {
			cancel()
			return nil, fmt.Errorf("testenv: webhook server did not start: %w (%v)", err, drain(m.done))
		}
		if !e.installed {
			root, err := localcluster.RepoRoot()
			if err != nil {
				cancel()
				return nil, err
			}
			hooks := localcluster.LocalWebhooks{
				ManifestPath: filepath.Join(root, "config", "webhook", "manifests.yaml"),
				URL:          e.WebhookURL,
				CABundle:     e.caPEM,
				Serves:       served.has,
			}
			if err := hooks.Install(syncCtx, e.Clientset); err != nil {
				cancel()
				return nil, err
			}
			e.installed = true
		}
	}
	e.manager = m
	return m, nil
}

// StopManager stops the running in-process manager, if any, and waits for
// it to return. Webhook configurations stay installed, so admission
// requests fail (or are ignored, per failure policy) until StartManager.
func (e *Env) StopManager() {
	e.mu.Lock()
	m := e.manager
	e.manager = nil
	e.mu.Unlock()
	if m == nil {
		return
	}
	m.cancel()
	select {
	case err := <-m.done:
		if err != nil {
			fmt.Fprintf(os.Stderr, "testenv: manager stopped with an error: %v\n", err)
		}
	case <-time.After(30 * time.Second):
		fmt.Fprintln(os.Stderr, "testenv: manager did not stop within 30s")
	}
}

// Manager returns the running in-process manager, or nil.
func (e *Env) Manager() *Manager {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.manager
}

// servedPaths records the webhook paths a manager registered.
type servedPaths struct {
	mu    sync.Mutex
	paths map[string]bool
}

func (s *servedPaths) add(p string) { s.mu.Lock(); s.paths[p] = true; s.mu.Unlock() }

func (s *servedPaths) has(p string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paths[p]
}

func (s *servedPaths) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.paths) }

// recordingServer is a webhook server that remembers which paths were
// registered, so that only those webhooks are installed.
type recordingServer struct {
	webhook.Server
	served *servedPaths
}

func (r *recordingServer) Register(path string, hook http.Handler) {
	r.served.add(path)
	r.Server.Register(path, hook)
}

func drain(ch chan error) error {
	select {
	case err := <-ch:
		return err
	default:
		return nil
	}
}
