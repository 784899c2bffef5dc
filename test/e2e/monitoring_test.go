package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// metricsUsedByTheBundle runs bin/promcheck (hack/promcheck: Prometheus' own
// rule and PromQL parsers) over config/monitoring's PrometheusRule and
// Grafana dashboard: it fails on any rule or query they refuse, and returns
// the metric names and __name__ patterns the queries read.
func metricsUsedByTheBundle(t *testing.T) (names, patterns []string) {
	t.Helper()
	bin := filepath.Join(suite.root, "bin", "promcheck")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found: run `make promcheck` (make test does)", bin)
	}
	dir := filepath.Join(suite.root, "config", "monitoring")
	out, err := exec.Command(bin, filepath.Join(dir, "prometheusrule.yaml"), filepath.Join(dir, "grafana-dashboard.json")).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("promcheck refuses the monitoring bundle: %v\n%s", err, stderr)
	}
	var res struct {
		Rules          int      `json:"rules"`
		Metrics        []string `json:"metrics"`
		MetricPatterns []string `json:"metricPatterns"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if res.Rules < 8 || len(res.Metrics) == 0 {
		t.Fatalf("promcheck read %d rules and %d metrics: the bundle lost its alerts", res.Rules, len(res.Metrics))
	}
	return res.Metrics, res.MetricPatterns
}

// kubeStateMetricsNames are the metric names config/monitoring's
// kube-state-metrics configuration makes: <metricNamePrefix>_<name>.
func kubeStateMetricsNames(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(suite.root, "config", "monitoring", "kube-state-metrics.yaml"))
	if err != nil {
		t.Fatal(err)
	}
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
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
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
	raw, err := os.ReadFile(filepath.Join(suite.root, "config", "monitoring", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
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
	if err := yaml.Unmarshal(raw, &rule); err != nil {
		t.Fatal(err)
	}
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
}

// TestMonitoringBundleReadsExportedMetrics: every metric the alerts and the
// dashboard of config/monitoring read is one the manager exports (or the
// kube-state-metrics configuration beside them makes, or a named external
// exporter's), so no alert or panel stays silent because of a wrong name.
// The manager is scraped with the bundle's own credentials shape: a
// ServiceAccount token bound to the metrics-reader role.
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
