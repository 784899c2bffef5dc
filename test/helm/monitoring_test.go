package helm

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestMonitoringFollowsTheRelease renders the monitoring bundle into a
// namespace other than config/default's: the ServiceMonitor verifies the
// metrics endpoint by a name the serving certificate carries, the rules'
// queries of the manager's metrics are scoped to the release's namespace and
// the metrics Service's job, and the runbook links follow
// prometheusRule.runbookBaseURL.
func TestMonitoringFollowsTheRelease(t *testing.T) {
	const ns, base = "observed", "https://wiki.example/deckhand/runbooks"
	r := rendered(render(t, ns, "serviceMonitor.enabled=true", "prometheusRule.enabled=true", "certManager.enabled=true",
		"prometheusRule.runbookBaseURL="+base+"/"))

	endpoints := nested(t, r.get(t, "ServiceMonitor/"+ns+"/deckhand-controller-manager"), "spec", "endpoints").([]any)
	tlsConfig := endpoints[0].(map[string]any)["tlsConfig"].(map[string]any)
	if v, ok := tlsConfig["insecureSkipVerify"]; ok {
		t.Errorf("the ServiceMonitor sets insecureSkipVerify: %v", v)
	}
	ca, _ := tlsConfig["ca"].(map[string]any)["secret"].(map[string]any)
	serving := r.get(t, "Certificate/"+ns+"/deckhand-serving-cert")
	if ca["name"] != nested(t, serving, "spec", "secretName") || ca["key"] != "ca.crt" {
		t.Errorf("the ServiceMonitor trusts %v, want ca.crt of the serving certificate's Secret", ca)
	}
	metrics := r.get(t, "Service/"+ns+"/deckhand-controller-manager-metrics-service")
	server := tlsConfig["serverName"]
	if want := metrics.GetName() + "." + ns + ".svc"; server != want {
		t.Errorf("serverName %v, want %s", server, want)
	}
	if names := nested(t, serving, "spec", "dnsNames").([]any); !slices.Contains(names, server) {
		t.Errorf("the serving certificate's names %v lack the serverName %v", names, server)
	}

	job := regexp.MustCompile(`job="` + regexp.QuoteMeta(metrics.GetName()) + `", namespace="` + ns + `"`)
	for _, g := range nested(t, r.get(t, "PrometheusRule/"+ns+"/deckhand"), "spec", "groups").([]any) {
		for _, rule := range g.(map[string]any)["rules"].([]any) {
			rule := rule.(map[string]any)
			expr := rule["expr"].(string)
			if strings.Contains(expr, "deckhand-system") {
				t.Errorf("%s still names deckhand-system: %s", rule["alert"], expr)
			}
			if strings.Contains(expr, "job=") && !job.MatchString(expr) {
				t.Errorf("%s is not scoped to %s: %s", rule["alert"], job, expr)
			}
			url, _ := rule["annotations"].(map[string]any)["runbook_url"].(string)
			if page, ok := strings.CutPrefix(url, base+"/"); !ok || !strings.HasSuffix(page, ".md") || strings.Contains(page, "/") {
				t.Errorf("%s links runbook %q, want a page under %s", rule["alert"], url, base)
			}
		}
	}
}
