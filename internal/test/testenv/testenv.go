// Package testenv runs a package's integration tests against a real local
// control plane (internal/test/localcluster) with Deckhand's CRDs and webhooks
// installed and an in-process manager that can be stopped and started again.
//
// One control plane serves a whole test package (started in TestMain); each
// test works in a namespace of its own:
//
//	var env *testenv.Env
//
//	func TestMain(m *testing.M) {
//		os.Exit(testenv.Run(m, &env, testenv.Options{
//			Full:  true, // adds kube-controller-manager, kube-scheduler, kwok
//			Setup: func(mgr ctrl.Manager) error { return (&podset.Reconciler{}).SetupWithManager(mgr) },
//		}))
//	}
//
//	func TestScale(t *testing.T) {
//		ns := env.Namespace(t)
//		...
//	}
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/operator"
	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// SetupFunc registers controllers and webhooks with a manager.
type SetupFunc func(mgr ctrl.Manager) error

// Options configure a package's test environment.
type Options struct {
	// Full adds kube-controller-manager (Deployments, garbage collection),
	// kube-scheduler and kwok with FakeNodes fake nodes (default 1), on
	// which scheduled pods become Running and Ready.
	Full      bool
	FakeNodes int
	// Setup registers what the in-process manager runs. Nil runs no manager.
	// AllOfDeckhand registers everything, as the deckhand binary does.
	Setup SetupFunc
	// Cluster, if set, replaces the options derived from Full.
	Cluster *localcluster.Options
	// DetectCacheMutations runs the package's tests with client-go's
	// cache mutation detector on: a controller that writes into an object
	// an informer holds makes the test binary panic. client-go reads the
	// switch (KUBE_CACHE_MUTATION_DETECTOR) once, at process start, so the
	// test binary runs itself again with it set.
	DetectCacheMutations bool
	// GatewayAPI installs the Gateway API's Gateway and HTTPRoute CRDs
	// before the manager starts (localcluster.InstallGatewayAPI).
	GatewayAPI bool
}

const mutationDetectorEnv = "KUBE_CACHE_MUTATION_DETECTOR"

// AllOfDeckhand registers every controller and webhook, exactly as the
// deckhand binary does.
func AllOfDeckhand(opts operator.Options) SetupFunc {
	return func(mgr ctrl.Manager) error { return operator.Setup(mgr, opts) }
}

// Env is a running test environment.
type Env struct {
	Cluster *localcluster.Cluster
	// Config is an admin client configuration without client-side rate limits.
	Config *rest.Config
	// ManagerConfig is what the in-process manager runs with: the manager's
	// ServiceAccount bound to the roles config/default generates, as in a
	// real installation (localcluster.InstallManagerIdentity). Every request
	// the API server refuses it fails the test during which it happened.
	ManagerConfig *rest.Config
	// Client is an uncached client whose scheme knows core and Deckhand types.
	Client    client.Client
	Clientset kubernetes.Interface
	Scheme    *runtime.Scheme

	// WebhookURL is where the API server sends admission requests
	// (https://127.0.0.1:<port>); the same for every manager started.
	WebhookURL string

	setup       SetupFunc
	webhookPort int
	certDir     string
	refused     *refusedRequests
	caPEM       []byte
	logFile     *os.File

	mu        sync.Mutex
	manager   *Manager
	installed bool
}

// Scheme returns a scheme with the core Kubernetes and Deckhand types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(deckhandv1alpha1.AddToScheme(s))
	utilruntime.Must(gatewayv1.Install(s))
	return s
}

// Run starts the environment, stores it in *env, runs the package's tests
// and stops everything again. Use it as the body of TestMain. When a test
// fails, the tail of every component's log (and the manager's) is printed.
// In -short mode it runs nothing (see testutil.SkipInShortMode); a package
// whose pure tests should run there leaves env nil instead of calling Run,
// and skips its other tests on a nil env.
func Run(m *testing.M, env **Env, opts Options) int {
	if testutil.SkipInShortMode(strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")) {
		return 0
	}
	if opts.DetectCacheMutations && os.Getenv(mutationDetectorEnv) != "true" {
		return runAgainWith(mutationDetectorEnv + "=true")
	}
	e, err := start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	*env = e

	// A Ctrl-C or a `go test -timeout` still stops every process.
	release := localcluster.StopOnInterrupt(e.stop)

	code := m.Run()
	release()
	if refused := e.refused.since(0); code == 0 && len(refused) > 0 {
		// Refusals outside any test (at start-up, between tests).
		fmt.Fprintf(os.Stderr, "testenv: the API server refused %d request(s) of the manager under its own identity; the first:\n%s\n",
			len(refused), strings.Join(refused[:min(len(refused), 5)], "\n"))
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "\n===== testenv: component logs (tests failed) =====\n%s\n", e.Cluster.Logs(60))
	}
	e.stop()
	return code
}

func start(opts Options) (*Env, error) {
	ctx := context.Background()
	clusterOpts := localcluster.Options{}
	if opts.Full {
		n := opts.FakeNodes
		if n == 0 {
			n = 1
		}
		clusterOpts = localcluster.Full(n)
	}
	if opts.Cluster != nil {
		clusterOpts = *opts.Cluster
	}
	cluster, err := localcluster.Start(ctx, clusterOpts)
	if err != nil {
		return nil, err
	}
	e := &Env{Cluster: cluster, Config: cluster.Config, Scheme: Scheme(), setup: opts.Setup, Clientset: cluster.Clientset()}
	ok := false
	defer func() {
		if !ok {
			e.stop()
		}
	}()
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		return nil, err
	}
	root, err := localcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := localcluster.InstallCRDs(e.Config, filepath.Join(root, "config", "crd", "bases")); err != nil {
		return nil, fmt.Errorf("installing CRDs: %w", err)
	}
	if opts.GatewayAPI {
		if err := localcluster.InstallGatewayAPI(e.Config, root); err != nil {
			return nil, fmt.Errorf("installing the Gateway API: %w", err)
		}
	}
	id, err := cluster.InstallManagerIdentity(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("manager identity: %w", err)
	}
	// The admission policy a real installation puts on that identity: a
	// write of the manager it refuses fails the test, as a missing
	// permission does.
	if err := cluster.InstallAdmissionPolicy(ctx, root); err != nil {
		return nil, fmt.Errorf("admission policy: %w", err)
	}
	e.ManagerConfig = rest.CopyConfig(id.Config)
	e.ManagerConfig.QPS = -1 // as before: tests measure behaviour, not client-side rate limits
	e.refused = &refusedRequests{}
	e.ManagerConfig.Wrap(e.refused.wrap)

	// The manager's log goes to a file in the cluster directory, next to the
	// components' logs, so that a failure shows all of them together.
	if e.logFile, err = os.Create(filepath.Join(cluster.Dir(), "manager.log")); err != nil {
		return nil, err
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(e.logFile), zap.UseDevMode(true)))

	if opts.Setup != nil {
		if e.webhookPort, err = localcluster.FreePort(); err != nil {
			return nil, err
		}
		e.WebhookURL = "https://127.0.0.1:" + strconv.Itoa(e.webhookPort)
		e.certDir = filepath.Join(cluster.Dir(), "webhook-certs")
		if e.caPEM, err = localcluster.LocalWebhookCerts(e.certDir); err != nil {
			return nil, err
		}
		if _, err := e.StartManager(); err != nil {
			return nil, err
		}
	}
	ok = true
	return e, nil
}

func (e *Env) stop() {
	e.StopManager()
	if e.Cluster != nil {
		e.Cluster.Stop()
	}
}

// BindSecretReader lets the manager read the Secrets of namespace ns, as a
// namespace that opts in does: a RoleBinding of the installed
// secret-reader ClusterRole (config/rbac/secret_reader_role.yaml) to the
// manager's ServiceAccount.
func (e *Env) BindSecretReader(ctx context.Context, t testing.TB, ns string) {
	t.Helper()
	testutil.Create(ctx, t, e.Client, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deckhand-secret-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "deckhand-secret-reader-role"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: localcluster.ManagerNamespace,
			Name: localcluster.ManagerServiceAccount}},
	})
	// When t ends, the namespace goes, the binding among the first of its
	// objects: a read the manager makes meanwhile is refused by design.
	// (Cleanups run last first: this one before the namespace's deletion.)
	t.Cleanup(func() { e.ExpectRefused("/api/v1/namespaces/" + ns + "/secrets/") })
	// The authorizer learns of a binding from a watch: wait until it
	// allows the read, so that the manager's first one is not refused.
	user := "system:serviceaccount:" + localcluster.ManagerNamespace + ":" + localcluster.ManagerServiceAccount
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets"}}}
		if err := e.Client.Create(ctx, sar); err != nil {
			return false, err
		}
		return sar.Status.Allowed, nil
	}, "the manager allowed to read the Secrets of %s", ns)
}

// ExpectRefused tells the check of Namespace that the API server refuses
// the manager's requests under path prefix by design (a test of what the
// manager does without a permission a namespace may withhold).
func (e *Env) ExpectRefused(prefix string) {
	if e.refused != nil {
		e.refused.expect(prefix)
	}
}

// Namespace creates a namespace unique to t and deletes it when t ends.
// A request of the manager that the API server refuses for lack of
// permission while t runs fails t: the roles config/default generates must
// cover everything the manager does.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	if e.refused != nil {
		mark := e.refused.count()
		t.Cleanup(func() {
			if refused := e.refused.since(mark); len(refused) > 0 {
				t.Errorf("the API server refused %d request(s) of the manager under its own identity (add the permission with a +kubebuilder:rbac marker); the first:\n%s",
					len(refused), strings.Join(refused[:min(len(refused), 5)], "\n"))
				e.refused.report()
			}
		})
	}
	return testutil.Namespace(t, e.Client)
}

// runAgainWith runs the test binary again, as it was run, with one more
// environment variable, and returns its exit code.
func runAgainWith(env string) int {
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "testenv: running the tests again with %s: %v\n", env, err)
		return 1
	}
}
