package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(deckhandv1alpha1.AddToScheme(s))
	return s
}()

// env is one local cluster with Deckhand's CRDs and webhooks installed and
// a Deckhand manager process.
type env struct {
	name    string
	root    string
	cluster *localcluster.Cluster
	c       client.Client // uncached, no client-side rate limit
	cs      kubernetes.Interface
	mgr     *localcluster.DeckhandProcess
	hooks   localcluster.LocalWebhooks
	port    int
	certDir string
	bin     string
	mgrArgs []string
	starts  int
	// pprofPort serves the manager's net/http/pprof (--pprof-bind-address).
	pprofPort int
}

func startEnv(ctx context.Context, cfg *config, name string, opts localcluster.Options, mgrArgs []string) (*env, error) {
	opts.BinDir = cfg.k8sBin
	logf("[%s] starting cluster", name)
	t0 := time.Now()
	cl, err := localcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	e := &env{name: name, root: cfg.root, cluster: cl, bin: cfg.deckhand, mgrArgs: mgrArgs}
	ok := false
	defer func() {
		if !ok {
			e.stop()
		}
	}()
	if e.c, err = client.New(cl.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	e.cs = cl.Clientset()
	if err := localcluster.InstallCRDs(cl.Config, filepath.Join(cfg.root, "config", "crd", "bases")); err != nil {
		return nil, err
	}
	e.certDir = filepath.Join(cl.Dir(), "webhook-certs")
	ca, err := localcluster.LocalWebhookCerts(e.certDir)
	if err != nil {
		return nil, err
	}
	if e.port, err = localcluster.FreePort(); err != nil {
		return nil, err
	}
	e.hooks = localcluster.LocalWebhooks{
		ManifestPath: filepath.Join(cfg.root, "config", "webhook", "manifests.yaml"),
		URL:          "https://127.0.0.1:" + strconv.Itoa(e.port),
		CABundle:     ca,
	}
	if err := e.hooks.Install(ctx, e.cs); err != nil {
		return nil, err
	}
	logf("[%s] cluster ready in %s", name, time.Since(t0).Round(100*time.Millisecond))
	if _, err := e.startManager(ctx, nil); err != nil {
		return nil, err
	}
	ok = true
	return e, nil
}

// startManager starts a new manager process with the extra environment
// variables environ (stopping a running one first) and returns the time the
// process was started.
func (e *env) startManager(ctx context.Context, environ []string) (time.Time, error) {
	if e.mgr != nil && !e.mgr.Exited() {
		e.mgr.Stop()
	}
	e.starts++
	args := append([]string{"--leader-elect=false", "--metrics-secure=false", "--cert-management=external", "--sidecarset-policy-injection"}, e.mgrArgs...)
	if p, err := localcluster.FreePort(); err == nil {
		e.pprofPort = p
		args = append(args, fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", p))
	}
	t0 := time.Now()
	m, err := e.cluster.StartDeckhand(ctx, localcluster.DeckhandOptions{
		Binary:      e.bin,
		WebhookPort: e.port,
		CertDir:     e.certDir,
		Name:        fmt.Sprintf("deckhand-%d", e.starts),
		Args:        args,
		Env:         environ,
	})
	if err != nil {
		return t0, err
	}
	e.mgr = m
	return t0, nil
}

func (e *env) managerLog() string {
	return filepath.Join(e.cluster.Dir(), fmt.Sprintf("deckhand-%d.log", e.starts))
}

func (e *env) stop() {
	if e.mgr != nil {
		e.mgr.Stop()
	}
	if e.cluster != nil {
		e.cluster.Stop()
	}
}

func (e *env) namespace(ctx context.Context, name string) error {
	return e.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// deletePods deletes the pods of ns that sel selects, without a grace
// period: no kubelet runs them, and the next run must not wait for them.
func (e *env) deletePods(ctx context.Context, ns string, sel metav1.ListOptions) error {
	return e.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, sel)
}

// deleteNamespace deletes ns and waits until it is gone, so that its
// objects' deletion is over before the next measurement starts.
func (e *env) deleteNamespace(ctx context.Context, ns string, timeout time.Duration) error {
	if err := e.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		err := e.c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		return err != nil && client.IgnoreNotFound(err) == nil, nil // not found: gone
	})
}
