package main

// OpenKruise's kruise-manager as a measured peer. hack/kruise/build.sh builds
// it from its Go module into bin/kruise (`make kruise`); this file installs
// its CRDs and webhook configurations into a local cluster and runs it as a
// process beside Deckhand, the way Kruise runs out of cluster in its own
// development setup (WEBHOOK_HOST): no Kruise code is compiled into the bench.

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

const (
	// kruiseNamespaceLabel=kruiseVariant marks the namespaces whose pods
	// Kruise's pod webhook sees, so that the pods of every other variant in
	// the same cluster never reach it.
	kruiseNamespaceLabel = "bench.deckhand.dev/variant"
	kruiseVariant        = "kruise"
	// kruiseSystemNamespace is where Kruise keeps its SidecarSets'
	// ControllerRevisions (and its leader lease when election is on).
	kruiseSystemNamespace = "kruise-system"
	// kruiseSidecarSetWorkers matches Deckhand's SidecarSet controller (and
	// Kruise's own default).
	kruiseSidecarSetWorkers = 3
	// Kruise's controllers start only after its webhook is serving, and each
	// waits for its informers: on a loaded 2-core machine that takes a while.
	kruiseStartTimeout = 3 * time.Minute
)

var kruiseBin = flag.String("kruise-bin", "", "Directory of kruise-manager and its crds/ (`make kruise`; default bin/kruise).")

// kruiseFeatureGates keep what SidecarSet needs (the pod webhook) and turn
// off what depends on kruise-daemon, a per-node agent that fake nodes cannot
// run, and the pod-webhook features that only add work to every pod create
// (WorkloadSpread, PodUnavailableBudget). KruiseDaemon=false also turns off
// the gates built on it (image pre-download, probe markers, env from
// metadata, sidecar terminator).
var kruiseFeatureGates = []string{
	"PodWebhook=true",
	"KruiseDaemon=false",
	"WorkloadSpread=false",
	"PodUnavailableBudgetDeleteGate=false",
}

// kruiseOptions are the resources kruise-manager gets.
type kruiseOptions struct {
	// dir holds kruise-manager and crds/ (bin/kruise).
	dir string
	// qps and burst are its client-side rate limit (--rest-config-qps and
	// --rest-config-burst; Kruise has no way to turn it off).
	qps, burst int
	// workers of the SidecarSet controller (--sidecarset-workers).
	workers int
}

// kruiseManager is a running kruise-manager.
type kruiseManager struct {
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	cs      kubernetes.Interface
	// LogPath is its klog output.
	logPath string
	// Ports on 127.0.0.1: webhook (TLS), /readyz, /metrics, net/http/pprof.
	webhookPort, healthPort, metricsPort, pprofPort int
	// started is when the process was started; serving is the time from
	// then to /readyz (webhook serving with its configurations patched),
	// working to the SidecarSet controller's workers running.
	started          time.Time
	serving, working time.Duration
}

// byManager holds the raw values of a side-by-side figure: manager ->
// figure -> values in the order they were measured.
type byManager map[string]map[string][]float64

func (b byManager) add(manager, figure string, v float64) {
	if b[manager] == nil {
		b[manager] = map[string][]float64{}
	}
	b[manager][figure] = append(b[manager][figure], v)
}

func kruiseDir(cfg *config) string {
	switch {
	case *kruiseBin == "":
		return filepath.Join(cfg.root, "bin", "kruise")
	case filepath.IsAbs(*kruiseBin):
		return *kruiseBin
	}
	return filepath.Join(cfg.root, *kruiseBin)
}

// kruiseMissing says why the Kruise rows cannot run ("" when they can): a
// quick run without bin/kruise skips them, a full run fails (`make bench`
// builds it first).
func kruiseMissing(cfg *config) (string, error) {
	bin := filepath.Join(kruiseDir(cfg), "kruise-manager")
	if _, err := os.Stat(bin); err != nil {
		if cfg.quick {
			return fmt.Sprintf("OpenKruise's manager is not built (%s absent: `make kruise`)", bin), nil
		}
		return "", fmt.Errorf("%s not found: run `make kruise` first", bin)
	}
	return "", nil
}

// benchKruiseOptions are Kruise's resources in the benchmark clusters, where
// Deckhand runs without a client-side limit: Kruise cannot turn its limit
// off, so it gets one above what the local API server can serve (as
// kube-controller-manager does in cluster B).
func benchKruiseOptions(cfg *config) kruiseOptions {
	return kruiseOptions{dir: kruiseDir(cfg), qps: 1000, burst: 2000, workers: kruiseSidecarSetWorkers}
}

// startKruise installs Kruise's CRDs and webhook configurations into cl and
// starts kruise-manager with cl's admin kubeconfig; it returns once the
// webhook serves and the SidecarSet controller runs.
//
// Every CRD of the release is installed, not only SidecarSet's: without
// ImagePullJob's the manager exits at start (it indexes that kind
// unconditionally), and it probes discovery for each kind its controllers
// and webhooks handle, retrying a missing one with backoff for about 15 s,
// one kind after the other.
func startKruise(ctx context.Context, cl *localcluster.Cluster, o kruiseOptions) (*kruiseManager, error) {
	bin := filepath.Join(o.dir, "kruise-manager")
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s not found: run `make kruise` first", bin)
	}
	if err := localcluster.InstallCRDs(cl.Config, filepath.Join(o.dir, "crds")); err != nil {
		return nil, fmt.Errorf("kruise CRDs: %w", err)
	}
	k := &kruiseManager{cs: cl.Clientset(), logPath: filepath.Join(cl.Dir(), "kruise-manager.log"), done: make(chan struct{})}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kruiseSystemNamespace}}
	if _, err := k.cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	for _, p := range []*int{&k.webhookPort, &k.healthPort, &k.metricsPort, &k.pprofPort} {
		var err error
		if *p, err = localcluster.FreePort(); err != nil {
			return nil, err
		}
	}
	if err := k.installWebhooks(ctx); err != nil {
		return nil, fmt.Errorf("kruise webhook configurations: %w", err)
	}

	at := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
	args := []string{
		"--enable-leader-election=false",
		"--metrics-addr=" + at(k.metricsPort),
		"--health-probe-addr=" + at(k.healthPort),
		"--enable-pprof=true", "--pprof-addr=" + at(k.pprofPort),
		"--rest-config-qps=" + strconv.Itoa(o.qps),
		"--rest-config-burst=" + strconv.Itoa(o.burst),
		"--sidecarset-workers=" + strconv.Itoa(o.workers),
		"--feature-gates=" + strings.Join(kruiseFeatureGates, ","),
	}
	// Truncated: the readiness check reads this start's log only.
	log, err := os.OpenFile(k.logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	k.cmd = exec.Command(bin, args...)
	k.cmd.Stdout, k.cmd.Stderr = log, log
	// Out of cluster: WEBHOOK_HOST makes Kruise write its self-signed
	// certificate (for that IP) to WEBHOOK_CERT_DIR instead of a Secret, and
	// point its webhook configurations at https://WEBHOOK_HOST:WEBHOOK_PORT.
	k.cmd.Env = append(os.Environ(),
		"KUBECONFIG="+cl.KubeconfigPath,
		"POD_NAMESPACE="+kruiseSystemNamespace,
		"WEBHOOK_HOST=127.0.0.1",
		"WEBHOOK_PORT="+strconv.Itoa(k.webhookPort),
		"WEBHOOK_CERT_DIR="+filepath.Join(cl.Dir(), "kruise-webhook-certs"),
	)
	k.cmd.SysProcAttr = localcluster.ChildProcAttr(syscall.SIGKILL)
	t0 := time.Now()
	k.started = t0
	if err := k.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting kruise-manager: %w", err)
	}
	go func() { k.waitErr = k.cmd.Wait(); log.Close(); close(k.done) }()

	if err := k.waitUntil(ctx, "/readyz", k.readyz); err != nil {
		k.stop()
		return nil, err
	}
	k.serving = time.Since(t0)
	if err := k.waitUntil(ctx, "the SidecarSet controller's workers", k.sidecarSetWorkersRunning); err != nil {
		k.stop()
		return nil, err
	}
	k.working = time.Since(t0)
	return k, nil
}

// waitUntil polls cond until it holds, the manager exits or
// kruiseStartTimeout passes.
func (k *kruiseManager) waitUntil(ctx context.Context, what string, cond func(context.Context) bool) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, kruiseStartTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-k.done:
			return false, fmt.Errorf("kruise-manager exited: %v", k.waitErr)
		default:
		}
		return cond(ctx), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for kruise-manager's %s: %w\n%s", what, err, k.logTail(30))
	}
	return nil
}

// readyz: Kruise answers 200 once its certificate is written, its webhook
// configurations carry the CA, and the webhook server answers over TLS.
func (k *kruiseManager) readyz(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", k.healthPort), nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// sidecarSetWorkersRunning reads the log: Kruise sets its controllers up only
// after its webhook is ready, and controller-runtime logs "Starting workers"
// once a controller's informers have synced.
func (k *kruiseManager) sidecarSetWorkersRunning(context.Context) bool {
	data, err := os.ReadFile(k.logPath)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.Contains(line, "Starting workers") && strings.Contains(line, `"sidecarset-controller"`) {
			return true
		}
	}
	return false
}

func (k *kruiseManager) logTail(n int) string {
	data, _ := os.ReadFile(k.logPath)
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// errorLines are the lines Kruise logged at error level (klog's "E" prefix).
func (k *kruiseManager) errorLines() []string {
	data, _ := os.ReadFile(k.logPath)
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if len(line) > 5 && line[0] == 'E' && line[1] >= '0' && line[1] <= '9' {
			out = append(out, line)
		}
	}
	return out
}

func (k *kruiseManager) pid() int { return k.cmd.Process.Pid }

// metrics reads its controller-runtime metrics (the Go runtime's
// go_memstats_* and client-go's rest_client_requests_total among them).
func (k *kruiseManager) metrics(ctx context.Context) (metrics, error) {
	body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", k.metricsPort))
	if err != nil {
		return nil, err
	}
	return parseMetrics(bytes.NewReader(body)), nil
}

// forceGC makes it run a garbage collection (the heap profile handler does
// one when asked with gc=1).
func (k *kruiseManager) forceGC(ctx context.Context) error {
	_, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", k.pprofPort))
	return err
}

// stop ends kruise-manager (SIGTERM, SIGKILL after 20 s) and removes its
// webhook configurations, so that the cluster's other variants never call a
// webhook that is gone.
func (k *kruiseManager) stop() {
	select {
	case <-k.done:
	default:
		_ = syscall.Kill(-k.pid(), syscall.SIGTERM)
		select {
		case <-k.done:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-k.pid(), syscall.SIGKILL)
			<-k.done
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = k.cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, kruiseMutatingConfig, metav1.DeleteOptions{})
	_ = k.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, kruiseValidatingConfig, metav1.DeleteOptions{})
}

// The configuration names kruise-manager looks for: it refuses to become
// ready until both exist, then fills in their CA bundle.
const (
	kruiseMutatingConfig   = "kruise-mutating-webhook-configuration"
	kruiseValidatingConfig = "kruise-validating-webhook-configuration"
)

// installWebhooks creates the two configurations with the webhooks a
// SidecarSet needs (the pod injector and SidecarSet defaulting and
// validation), as in Kruise's config/webhook/manifests.yaml but pointing at
// 127.0.0.1 and with the pod webhook limited to the namespaces labelled for
// Kruise. Kruise keeps the webhooks it is given (saved in a "template"
// annotation on first sight) and only adds its CA: Kruise's other webhooks
// stay out, so Kruise's other kinds are neither defaulted nor validated.
func (k *kruiseManager) installWebhooks(ctx context.Context) error {
	url := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(fmt.Sprintf("https://127.0.0.1:%d%s", k.webhookPort, path))}
	}
	rules := func(group, resource string, versions []string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: versions, Resources: []string{resource}}}}
	}
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	kruiseVersions := []string{"v1alpha1", "v1beta1"}
	fail, none := ptr.To(admissionregistrationv1.Fail), ptr.To(admissionregistrationv1.SideEffectClassNone)
	reviews := []string{"v1", "v1beta1"}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: kruiseMutatingConfig},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "mpod.kb.io", ClientConfig: url("/mutate-pod"),
			Rules:             rules("", "pods", []string{"v1"}, create),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{kruiseNamespaceLabel: kruiseVariant}},
			FailurePolicy:     fail, SideEffects: none, AdmissionReviewVersions: reviews,
		}, {
			Name: "msidecarset.kb.io", ClientConfig: url("/mutate-apps-kruise-io-sidecarset"),
			Rules:         rules("apps.kruise.io", "sidecarsets", kruiseVersions, create, update),
			FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: reviews,
		}},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: kruiseValidatingConfig},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "vsidecarset.kb.io", ClientConfig: url("/validate-apps-kruise-io-sidecarset"),
			Rules:         rules("apps.kruise.io", "sidecarsets", kruiseVersions, create, update),
			FailurePolicy: fail, SideEffects: none, AdmissionReviewVersions: reviews,
		}},
	}
	mapi := k.cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if err := mapi.Delete(ctx, mutating.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if _, err := mapi.Create(ctx, mutating, metav1.CreateOptions{}); err != nil {
		return err
	}
	vapi := k.cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if err := vapi.Delete(ctx, validating.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_, err := vapi.Create(ctx, validating, metav1.CreateOptions{})
	return err
}
