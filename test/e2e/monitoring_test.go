package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/certs"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// The manager's scrape target as config/monitoring names it: the job is the
// metrics Service's name (the ServiceMonitor's default job label), and the
// alerts link their runbooks under runbookBase (docs/runbooks on GitHub).
const (
	metricsService = "deckhand-controller-manager-metrics-service"
	runbookBase    = "https://github.com/deckhand-dev/deckhand/blob/main/docs/runbooks"
)

// metricsUsedByTheBundle runs bin/promcheck (hack/promcheck: Prometheus' own
// rule and PromQL parsers) over config/monitoring's PrometheusRule and
// Grafana dashboard: it fails on any rule or query they refuse, on a
// selector of the manager's metrics not scoped to its job and namespace (the
// dashboard's: to its namespace, job and instance variables), on a dashboard
// without those variables, and on an alert whose runbook_url is not a page of
// docs/runbooks about it. It returns the metric names and __name__ patterns
// the queries read.
func metricsUsedByTheBundle(t *testing.T) (names, patterns []string) {
	t.Helper()
	bin := filepath.Join(suite.root, "bin", "promcheck")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found: run `make promcheck` (make test does)", bin)
	}
	dir := filepath.Join(suite.root, "config", "monitoring")
	out, err := exec.Command(bin, "-job", metricsService, "-namespace", systemNamespace,
		"-runbook-base", runbookBase, "-runbooks", filepath.Join(suite.root, "docs", "runbooks"),
		filepath.Join(dir, "prometheusrule.yaml"), filepath.Join(dir, "grafana-dashboard.json")).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("promcheck refuses the monitoring bundle: %v\n%s", err, stderr)
	}
	var res struct {
		Rules           int      `json:"rules"`
		ScopedSelectors int      `json:"scopedSelectors"`
		Metrics         []string `json:"metrics"`
		MetricPatterns  []string `json:"metricPatterns"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if res.Rules < 8 || len(res.Metrics) == 0 {
		t.Fatalf("promcheck read %d rules and %d metrics: the bundle lost its alerts", res.Rules, len(res.Metrics))
	}
	if res.ScopedSelectors == 0 {
		t.Fatal("promcheck checked the scope of no selector")
	}
	return res.Metrics, res.MetricPatterns
}

// readBundleFile decodes config/monitoring/<name> into v.
func readBundleFile(t *testing.T, name string, v any) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(suite.root, "config", "monitoring", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// kubeStateMetricsNames are the metric names config/monitoring's
// kube-state-metrics configuration makes: <metricNamePrefix>_<name>.
func kubeStateMetricsNames(t *testing.T) []string {
	t.Helper()
	var cfg struct {
		Kind string `json:"kind"`
		Spec struct {
			Resources []struct {
				GroupVersionKind struct{ Group, Kind string } `json:"groupVersionKind"`
				MetricNamePrefix string                       `json:"metricNamePrefix"`
				Metrics          []struct {
					Name string `json:"name"`
				} `json:"metrics"`
			} `json:"resources"`
		} `json:"spec"`
	}
	readBundleFile(t, "kube-state-metrics.yaml", &cfg)
	if cfg.Kind != "CustomResourceStateMetrics" {
		t.Fatalf("kube-state-metrics.yaml is a %q, want CustomResourceStateMetrics", cfg.Kind)
	}
	var names []string
	kinds := map[string]bool{}
	for _, r := range cfg.Spec.Resources {
		kinds[r.GroupVersionKind.Kind] = r.GroupVersionKind.Group == deckhandv1alpha1.GroupVersion.Group
		for _, m := range r.Metrics {
			names = append(names, r.MetricNamePrefix+"_"+m.Name)
		}
	}
	for _, k := range []string{"SidecarSet", "PodSet", "WebServer", "RestartSchedule"} {
		if !kinds[k] {
			t.Errorf("the kube-state-metrics configuration has no %s of %s", k, deckhandv1alpha1.GroupVersion.Group)
		}
	}
	return names
}

// triggerAlerts are the alerts on RestartSchedules' triggers and the metric
// each must read: data missing for long, evictions refused by
// PodDisruptionBudgets for long, triggered replacements far above normal.
var triggerAlerts = map[string]string{
	"DeckhandTriggerDataMissing":        "kube_deckhand_restartschedule_status_condition",
	"DeckhandTriggeredEvictionsBlocked": "deckhand_restartschedule_pod_evictions_total",
	"DeckhandTriggeredRestartsHigh":     "deckhand_restartschedule_pod_evictions_total",
}

// alertExprs are the expressions of config/monitoring's alerts, by name.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct {
					Alert string `json:"alert"`
					Expr  string `json:"expr"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	readBundleFile(t, "prometheusrule.yaml", &rule)
	exprs := map[string]string{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr
		}
	}
	return exprs
}

// externalMetrics are read from other exporters and appear there only once
// what they count has happened; each says where it comes from.
var externalMetrics = map[string]string{
	"apiserver_admission_webhook_fail_open_count":                   "kube-apiserver, after a webhook failed open",
	"apiserver_admission_webhook_admission_duration_seconds_bucket": "kube-apiserver",
	"kube_deployment_status_replicas_available":                     "kube-state-metrics",
	"up": "Prometheus, for each target it scrapes",
}

// TestMonitoringBundleReadsExportedMetrics: every metric the alerts and the
// dashboard of config/monitoring read is one the manager exports (or the
// kube-state-metrics configuration beside them makes, or a named external
// exporter's), so no alert or panel stays silent because of a wrong name.
// The manager is scraped as the bundle's ServiceMonitor scrapes it: a
// ServiceAccount token bound to the metrics-reader role, and the endpoint's
// certificate verified against the CA and for the server name its tlsConfig
// names.
func TestMonitoringBundleReadsExportedMetrics(t *testing.T) {
	names, patterns := metricsUsedByTheBundle(t)
	ksm := kubeStateMetricsNames(t)

	// Make the per-SidecarSet series exist: one SidecarSet injecting one pod.
	ctx := tctx(t)
	ns := namespace(t)
	labels := map[string]string{"app": "monitored"}
	ss := sidecarSetFor(ns, labels, deckhandv1alpha1.SidecarContainer{Container: corev1.Container{Name: "metrics-agent", Image: "registry.example/agent:1"}})
	createObservedSidecarSet(t, ss)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "monitored", Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{pauseContainer}}}
	create(t, pod)
	if len(pod.Spec.Containers) != 2 {
		t.Fatalf("the pod was admitted with containers %v, want the sidecar injected", pod.Spec.Containers)
	}

	scrape := metricsScraper(ctx, t, ns)
	var exported map[string]bool
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		var err error
		exported, err = scrape(ctx)
		return exported["deckhand_sidecarset_pods"] && exported["deckhand_sidecarset_pods_injected_total"], err
	}, "the manager exports the SidecarSet's series")
	family := regexp.MustCompile(`_(bucket|sum|count)$`)
	for _, n := range names {
		switch {
		case externalMetrics[n] != "":
		case strings.HasPrefix(n, "kube_deckhand_"):
			if !slices.Contains(ksm, n) {
				t.Errorf("the bundle reads %s, which the kube-state-metrics configuration does not make (it makes %v)", n, ksm)
			}
		case !exported[n] && !exported[family.ReplaceAllString(n, "")]:
			t.Errorf("the bundle reads %s, which the manager does not export", n)
		}
	}
	exprs := alertExprs(t)
	for alert, metric := range triggerAlerts {
		expr, ok := exprs[alert]
		switch {
		case !ok:
			t.Errorf("the bundle has no alert %s", alert)
		case !strings.Contains(expr, metric):
			t.Errorf("alert %s does not read %s: %s", alert, metric, expr)
		case !exported[metric] && !slices.Contains(ksm, metric):
			t.Errorf("alert %s reads %s, which neither the manager nor the kube-state-metrics configuration makes", alert, metric)
		}
	}
	for _, p := range patterns {
		re := regexp.MustCompile("^(?:" + p + ")$")
		if !slices.ContainsFunc(ksm, re.MatchString) && !slices.ContainsFunc(slices.Collect(maps.Keys(exported)), re.MatchString) {
			t.Errorf("the bundle reads {__name__=~%q}, which matches no metric the manager or kube-state-metrics makes", p)
		}
	}
}

// serviceMonitorTLS is the tlsConfig of config/monitoring's ServiceMonitor:
// the Secret key holding the CA it trusts, and the name it verifies.
type serviceMonitorTLS struct {
	CA struct {
		Secret struct{ Name, Key string } `json:"secret"`
	} `json:"ca"`
	ServerName         string `json:"serverName"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify"`
}

func readServiceMonitorTLS(t *testing.T) serviceMonitorTLS {
	t.Helper()
	var sm struct {
		Spec struct {
			Endpoints []struct {
				TLSConfig serviceMonitorTLS `json:"tlsConfig"`
			} `json:"endpoints"`
		} `json:"spec"`
	}
	readBundleFile(t, "servicemonitor.yaml", &sm)
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("the ServiceMonitor has %d endpoints, want 1", len(sm.Spec.Endpoints))
	}
	c := sm.Spec.Endpoints[0].TLSConfig
	if c.InsecureSkipVerify || c.CA.Secret.Name == "" || c.ServerName == "" {
		t.Fatalf("the ServiceMonitor does not verify the endpoint: tlsConfig %+v", c)
	}
	return c
}

// trusting returns an HTTP client that verifies the server as c says, with
// the CA read from the cluster now (a CA renewal replaces it).
func (c serviceMonitorTLS) trusting(ctx context.Context) (*http.Client, error) {
	var s corev1.Secret
	if err := suite.client.Get(ctx, types.NamespacedName{Namespace: systemNamespace, Name: c.CA.Secret.Name}, &s); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.Data[c.CA.Secret.Key]) {
		return nil, fmt.Errorf("secret %s holds no CA certificate in %s", c.CA.Secret.Name, c.CA.Secret.Key)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: c.ServerName, MinVersion: tls.VersionTLS12},
	}}, nil
}

// metricsScraper reads the manager's metrics endpoint as the ServiceMonitor
// would (a ServiceAccount token bound to the metrics-reader role, the
// server's certificate verified as its tlsConfig says); each call returns
// the metric names in it (histograms under their family name and with their
// series' suffixes).
func metricsScraper(ctx context.Context, t *testing.T, ns string) func(context.Context) (map[string]bool, error) {
	t.Helper()
	const sa = "bundle-scraper"
	create(t, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}})
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-bundle-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: metricsReaderRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}},
	}
	create(t, binding)
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), binding) })
	tok, err := suite.clientset.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	verify := readServiceMonitorTLS(t)
	url := fmt.Sprintf("https://127.0.0.1:%d/metrics", suite.deckhand.MetricsPort)
	return func(ctx context.Context) (map[string]bool, error) {
		httpc, err := verify.trusting(ctx)
		if err != nil {
			return nil, err
		}
		defer httpc.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+tok.Status.Token)
		resp, err := httpc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
		}
		names := map[string]bool{}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
				names[strings.Fields(f)[0]] = true
			} else if line != "" && !strings.HasPrefix(line, "#") {
				names[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
			}
		}
		return names, sc.Err()
	}
}

// TestMonitoringCertificateGainsTheMetricsName: a serving certificate issued
// before the metrics Service's name was among its names (as after an
// upgrade) is replaced by one that has them all, so that the
// ServiceMonitor's verification does not wait for its expiry; the scrape
// then verifies.
func TestMonitoringCertificateGainsTheMetricsName(t *testing.T) {
	ctx := tctx(t)
	verify := readServiceMonitorTLS(t)
	var stale []byte
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s := certificateSecret(t)
		ca, err := certs.ParseCA(s.Data)
		if err != nil {
			return err
		}
		now := time.Now()
		cert, key, err := servingCertRotator("localhost").CreateCertPEM(ca, now.Add(-time.Hour), now.Add(time.Hour))
		if err != nil {
			return err
		}
		s.Data["tls.crt"], s.Data["tls.key"], stale = cert, key, cert
		return suite.client.Update(ctx, s)
	}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		var s corev1.Secret
		if err := suite.client.Get(ctx, types.NamespacedName{Namespace: systemNamespace, Name: certSecret}, &s); err != nil {
			return false, err
		}
		block, _ := pem.Decode(s.Data["tls.crt"])
		if block == nil || bytes.Equal(s.Data["tls.crt"], stale) {
			return false, nil
		}
		c, err := x509.ParseCertificate(block.Bytes)
		return err == nil && slices.Contains(c.DNSNames, verify.ServerName), err
	}, "the serving certificate is issued again, for the metrics Service's name too")
	scrape := metricsScraper(ctx, t, namespace(t))
	testutil.Eventually(t, 30*time.Second, func(ctx context.Context) (bool, error) {
		_, err := scrape(ctx)
		return err == nil, err
	}, "the scrape verifies the reissued certificate")
}
