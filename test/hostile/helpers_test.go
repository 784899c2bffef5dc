package hostile

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deckhand-dev/deckhand/internal/test/localcluster"
)

// managerRSS is the manager process's resident set size in bytes: what an
// OOM killer and a container's memory limit count. It is read from
// /proc/PID/smaps_rollup, which sums the pages exactly; VmRSS in
// /proc/PID/status comes from per-thread counters that the kernel folds in
// lazily, and read off the same process it was 5 MiB higher.
func managerRSS(t *testing.T) int64 {
	t.Helper()
	path := fmt.Sprintf("/proc/%d/smaps_rollup", suite.Deckhand.Pid())
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("reading the manager's memory: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Rss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("parsing Rss %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no Rss in %s", path)
	return 0
}

// webhookClient talks to the webhook port the way anything that reaches it
// could: TLS without a client certificate, the server's certificate not
// checked.
func webhookClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the caller is the attacker, not the API server
			DisableKeepAlives: true,
		},
	}
}

// postWebhook POSTs body to path on the webhook port with no client
// certificate and returns the status code and up to 64 KiB of the answer.
func postWebhook(t *testing.T, path string, body io.Reader, timeout time.Duration) (int, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t, timeout), http.MethodPost, "https://127.0.0.1:"+strconv.Itoa(suite.WebhookPort)+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := webhookClient(timeout).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = io.Copy(&out, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, out.Bytes(), nil
}

// replaceManager stops the suite's manager and starts, in its place (its
// webhook port, which the installed webhook configurations call), one with
// args and plain-HTTP metrics; the suite's manager is back when t ends.
func replaceManager(t *testing.T, name string, args ...string) *localcluster.DeckhandProcess {
	t.Helper()
	ensureDeckhand(t)
	suite.Deckhand.Stop()
	t.Cleanup(func() {
		if !suite.Deckhand.Exited() {
			return
		}
		c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := suite.Deckhand.Restart(c); err != nil {
			t.Errorf("restarting the suite's manager: %v", err)
		}
	})
	return suite.StartReplica(t, localcluster.DeckhandOptions{
		Name: name, WebhookPort: suite.WebhookPort, Args: append([]string{"--metrics-secure=false"}, args...),
	})
}

// scrape returns the text of a /metrics endpoint: the API server's when
// d is nil, else the manager d's (served over plain HTTP).
func scrape(t *testing.T, d *localcluster.DeckhandProcess) string {
	t.Helper()
	if d == nil {
		raw, err := suite.Clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx(t, 30*time.Second))
		if err != nil {
			t.Fatalf("scraping the API server: %v", err)
		}
		return string(raw)
	}
	req, err := http.NewRequestWithContext(ctx(t, 30*time.Second), http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(d.MetricsPort)+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scraping the manager: %v", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// metricSum adds up the samples of metric name whose labels include every
// one of labels (each written as in the exposition: key="value").
func metricSum(text, name string, labels ...string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name+"{")
		if !ok {
			continue
		}
		set, value, ok := strings.Cut(rest, "} ")
		if !ok || !containsAll(set, labels) {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			sum += v
		}
	}
	return sum
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// podWatches is the number of pod watches the API server serves, its own
// informers' included.
func podWatches(t *testing.T) float64 {
	return metricSum(scrape(t, nil), "apiserver_longrunning_requests", `resource="pods"`, `verb="WATCH"`)
}
