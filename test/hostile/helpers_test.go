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

// managerRSS is the manager process's resident set size in bytes, read from
// /proc: what an OOM killer and a container's memory limit count.
func managerRSS(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", suite.Deckhand.Pid()))
	if err != nil {
		t.Fatalf("reading the manager's memory: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("parsing VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", suite.Deckhand.Pid())
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
