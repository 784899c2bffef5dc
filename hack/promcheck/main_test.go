package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The bundle under test: config/monitoring and docs/runbooks of this tree.
var (
	bundleRules     = filepath.Join("..", "..", "config", "monitoring", "prometheusrule.yaml")
	bundleDashboard = filepath.Join("..", "..", "config", "monitoring", "grafana-dashboard.json")
	bundleTarget    = target{
		job:         "deckhand-controller-manager-metrics-service",
		namespace:   "deckhand-system",
		runbookBase: "https://github.com/deckhand-dev/deckhand/blob/main/docs/runbooks",
		runbooks:    filepath.Join("..", "..", "docs", "runbooks"),
	}
)

func TestBundle(t *testing.T) {
	res, err := check(bundleTarget, bundleRules, bundleDashboard)
	if err != nil {
		t.Fatal(err)
	}
	if res.Rules == 0 || res.ScopedSelectors == 0 {
		t.Fatalf("read %d rules and %d scoped selectors", res.Rules, res.ScopedSelectors)
	}
}

// TestBundleRefusals breaks one thing of the bundle at a time: each must be
// refused with an error naming it.
func TestBundleRefusals(t *testing.T) {
	cases := map[string]struct {
		dashboard  bool // the change is to the dashboard, not the rules
		old, new   string
		wantErrors []string
	}{
		"alert without runbook_url": {
			old: "        runbook_url: https://github.com/deckhand-dev/deckhand/blob/main/docs/runbooks/deckhand-no-leader.md\n", new: "",
			wantErrors: []string{"rule DeckhandNoLeader", `runbook_url "" is not a page`},
		},
		"runbook page missing": {
			old: "/deckhand-no-leader.md", new: "/deckhand-no-such-page.md",
			wantErrors: []string{"rule DeckhandNoLeader", "no such file"},
		},
		"runbook of another alert": {
			old: "/deckhand-no-leader.md", new: "/deckhand-webhook-errors.md",
			wantErrors: []string{"rule DeckhandNoLeader", `titled "# DeckhandWebhookErrors"`},
		},
		"rule without namespace": {
			old:        `certwatcher_read_certificate_errors_total{job="deckhand-controller-manager-metrics-service", namespace="deckhand-system"}`,
			new:        `certwatcher_read_certificate_errors_total{job="deckhand-controller-manager-metrics-service"}`,
			wantErrors: []string{"rule DeckhandCertificateErrors", `lacks namespace="deckhand-system"`},
		},
		"rule without job": {
			old: `up{job="deckhand-controller-manager-metrics-service", namespace="deckhand-system"}`, new: `up{namespace="deckhand-system"}`,
			wantErrors: []string{"rule DeckhandMetricsScrapeFailing", `lacks job="deckhand-controller-manager-metrics-service"`},
		},
		"rule scoped to another namespace": {
			old:        `certwatcher_read_certificate_errors_total{job="deckhand-controller-manager-metrics-service", namespace="deckhand-system"}`,
			new:        `certwatcher_read_certificate_errors_total{job="deckhand-controller-manager-metrics-service", namespace=~"deckhand-.*"}`,
			wantErrors: []string{"rule DeckhandCertificateErrors", `lacks namespace="deckhand-system"`},
		},
		"panel without instance": {
			dashboard:  true,
			old:        `process_cpu_seconds_total{job=\"$job\", namespace=\"$namespace\", instance=~\"$instance\"}`,
			new:        `process_cpu_seconds_total{job=\"$job\", namespace=\"$namespace\"}`,
			wantErrors: []string{`panel "CPU, by instance"`, `lacks instance=~"$instance"`},
		},
		"panel without job": {
			dashboard: true,
			old:       `workqueue_depth{job=\"$job\", `, new: `workqueue_depth{`,
			wantErrors: []string{`panel "Work queue depth"`, `lacks job="$job"`},
		},
		"dashboard without its instance variable": {
			dashboard: true,
			old:       `"name": "instance"`, new: `"name": "pod"`,
			wantErrors: []string{"no template variable instance"},
		},
		"namespace variable not a query": {
			dashboard: true,
			old:       `"definition": "label_values(deckhand_build_info, namespace)"`, new: `"definition": "deckhand-system"`,
			wantErrors: []string{"template variable namespace", "want a query of label_values"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rules, dashboard := bundleRules, bundleDashboard
			changed := &rules
			if tc.dashboard {
				changed = &dashboard
			}
			raw, err := os.ReadFile(*changed)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(raw), tc.old) {
				t.Fatalf("%s holds no %q", *changed, tc.old)
			}
			*changed = filepath.Join(t.TempDir(), filepath.Base(*changed))
			if err := os.WriteFile(*changed, []byte(strings.Replace(string(raw), tc.old, tc.new, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = check(bundleTarget, rules, dashboard)
			if err == nil {
				t.Fatal("the broken bundle was accepted")
			}
			for _, want := range tc.wantErrors {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}
