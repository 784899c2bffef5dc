package localcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// PrometheusScrapeInterval is how often Prometheus scrapes the fake nodes'
// metrics (their DCGM exporters' series): a query's answer is at most this
// old.
const PrometheusScrapeInterval = time.Second

// prometheusConfig scrapes every fake node's metrics that kwok serves (the
// DCGM exporter's series among them), found through kwok's Prometheus HTTP
// service discovery (one target a node and kwok Metric; only the node
// Metric's are kept). Both speak TLS with the API server's serving
// certificate.
const prometheusConfig = `global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
- job_name: dcgm-exporter
  scrape_interval: %[1]s
  tls_config:
    ca_file: %[2]q
  http_sd_configs:
  - url: %[3]q
    refresh_interval: 5s
    tls_config:
      ca_file: %[2]q
  relabel_configs:
  - source_labels: [metrics_name]
    regex: %[4]s
    action: keep
`

// startPrometheus starts a Prometheus server on a free loopback port
// scraping the fake nodes' DCGM exporters and waits until it is ready.
func (c *Cluster) startPrometheus(ctx context.Context) error {
	dir := filepath.Join(c.dir, "prometheus")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	discovery := fmt.Sprintf("https://127.0.0.1:%d/discovery/prometheus", c.kwokPort)
	conf := fmt.Sprintf(prometheusConfig, promDuration(PrometheusScrapeInterval), filepath.Join(c.dir, "pki", "ca.crt"), discovery, kwokNodeMetricName)
	confPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	args := []string{
		"--config.file", confPath,
		"--storage.tsdb.path", filepath.Join(dir, "data"),
		"--web.listen-address", fmt.Sprintf("127.0.0.1:%d", port),
		"--log.level", "warn",
	}
	c.PrometheusURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	c.progress("starting prometheus on %s", c.PrometheusURL)
	if err := c.startComponent("prometheus", "prometheus", args); err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.checkAlive("prometheus"); err != nil {
			return false, err
		}
		return answersOK(ctx, c.PrometheusURL+"/-/ready")
	})
	if err != nil {
		return fmt.Errorf("prometheus not ready: %w", err)
	}
	return nil
}

// promDuration formats d as a Prometheus duration ("1s", "500ms").
func promDuration(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// PrometheusSample is one series of an instant query's answer.
type PrometheusSample struct {
	Labels map[string]string
	Value  float64
}

// QueryPrometheus runs an instant PromQL query against the cluster's
// Prometheus (Options.Metrics) through its HTTP API and returns the series
// of the vector it answers.
func (c *Cluster) QueryPrometheus(ctx context.Context, query string) ([]PrometheusSample, error) {
	if c.PrometheusURL == "" {
		return nil, fmt.Errorf("the cluster runs no Prometheus (Options.Metrics)")
	}
	u := c.PrometheusURL + "/api/v1/query?" + url.Values{"query": {query}}.Encode()
	resp, err := httpGet(ctx, u)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var answer struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, fmt.Errorf("prometheus query %q: %s: %w", query, resp.Status, err)
	}
	if answer.Status != "success" {
		return nil, fmt.Errorf("prometheus query %q: %s", query, answer.Error)
	}
	if answer.Data.ResultType != "vector" {
		return nil, fmt.Errorf("prometheus query %q: a %s, not a vector", query, answer.Data.ResultType)
	}
	out := make([]PrometheusSample, 0, len(answer.Data.Result))
	for _, r := range answer.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("prometheus query %q: value %v: %w", query, r.Value[1], err)
		}
		out = append(out, PrometheusSample{Labels: r.Metric, Value: v})
	}
	return out, nil
}
