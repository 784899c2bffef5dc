package hostile

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
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
