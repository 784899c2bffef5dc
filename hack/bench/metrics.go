package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"
)

type sample struct {
	labels map[string]string
	value  float64
}

// metrics is a parsed Prometheus text exposition.
type metrics map[string][]sample

func parseMetrics(r io.Reader) metrics {
	m := metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		labels := map[string]string{}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			name = line[:i]
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			parseLabels(line[i+1:j], labels)
			rest = strings.TrimSpace(line[j+1:])
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			name, rest = line[:i], strings.TrimSpace(line[i+1:])
		}
		if f := strings.Fields(rest); len(f) > 0 {
			v, err := strconv.ParseFloat(f[0], 64)
			if err == nil {
				m[name] = append(m[name], sample{labels, v})
			}
		}
	}
	return m
}

func parseLabels(s string, out map[string]string) {
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 || eq+1 >= len(s) || s[eq+1] != '"' {
			return
		}
		key := strings.TrimSpace(s[:eq])
		s = s[eq+2:]
		var b strings.Builder
		i := 0
		for ; i < len(s); i++ {
			if s[i] == '\\' && i+1 < len(s) {
				i++
				b.WriteByte(s[i])
				continue
			}
			if s[i] == '"' {
				break
			}
			b.WriteByte(s[i])
		}
		out[key] = b.String()
		s = strings.TrimLeft(s[min(i+1, len(s)):], ", ")
	}
}

// sum adds the samples of name whose labels match every key=value in match.
func (m metrics) sum(name string, match ...string) float64 {
	var t float64
	for s := range m.matching(name, match) {
		t += s.value
	}
	return t
}

// sumBy groups the samples of name by one label.
func (m metrics) sumBy(name, label string, match ...string) map[string]float64 {
	out := map[string]float64{}
	for s := range m.matching(name, match) {
		out[s.labels[label]] += s.value
	}
	return out
}

// matching ranges over the samples of name whose labels match every
// key=value in match.
func (m metrics) matching(name string, match []string) iter.Seq[sample] {
	return func(yield func(sample) bool) {
	outer:
		for _, s := range m[name] {
			for i := 0; i+1 < len(match); i += 2 {
				if s.labels[match[i]] != match[i+1] {
					continue outer
				}
			}
			if !yield(s) {
				return
			}
		}
	}
}

func (e *env) managerMetrics(ctx context.Context) (metrics, error) {
	body, err := httpGet(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", e.mgr.MetricsPort))
	if err != nil {
		return nil, err
	}
	return parseMetrics(bytes.NewReader(body)), nil
}

// httpGet returns the body of a GET answered 200 OK.
func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

func (e *env) apiserverMetrics(ctx context.Context) (metrics, error) {
	body, err := e.cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return parseMetrics(strings.NewReader(string(body))), nil
}

// snapshot is both metric sets at one instant.
type snapshot struct{ mgr, api metrics }

// scrape reads both metric sets. A failed scrape is an error, never zero
// requests: a cost computed from it would be a difference against nothing.
func (e *env) scrape(ctx context.Context) (snapshot, error) {
	var s snapshot
	var err error
	if s.mgr, err = e.managerMetrics(ctx); err != nil {
		return s, fmt.Errorf("scraping the manager's metrics: %w", err)
	}
	if s.api, err = e.apiserverMetrics(ctx); err != nil {
		return s, fmt.Errorf("scraping the API server's metrics: %w", err)
	}
	return s, nil
}

// cost is the request and reconcile counts between two snapshots.
type cost struct {
	mgrRequests     float64            // the manager's own API requests (rest_client_requests_total)
	mgrByMethod     map[string]float64 // ... by HTTP method
	kcmRequests     float64            // requests of kube-controller-manager's controllers (APF flow schema kube-system-service-accounts)
	apiMutating     float64            // every POST/PUT/PATCH/DELETE the API server served
	apiAll          float64            // every request the API server served (watches excluded)
	reconciles      map[string]float64 // controller_runtime_reconcile_total by controller
	apiByResourceMu map[string]float64 // mutating requests by resource
}

func diff(a, b snapshot) cost {
	c := cost{mgrByMethod: map[string]float64{}, reconciles: map[string]float64{}, apiByResourceMu: map[string]float64{}}
	c.mgrRequests = b.mgr.sum("rest_client_requests_total") - a.mgr.sum("rest_client_requests_total")
	am, bm := a.mgr.sumBy("rest_client_requests_total", "method"), b.mgr.sumBy("rest_client_requests_total", "method")
	for k, v := range bm {
		if d := v - am[k]; d > 0 {
			c.mgrByMethod[k] = d
		}
	}
	const flow = "apiserver_flowcontrol_dispatched_requests_total"
	c.kcmRequests = b.api.sum(flow, "flow_schema", "kube-system-service-accounts") - a.api.sum(flow, "flow_schema", "kube-system-service-accounts")
	for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "CREATE", "UPDATE"} {
		c.apiMutating += b.api.sum("apiserver_request_total", "verb", verb) - a.api.sum("apiserver_request_total", "verb", verb)
		ar, br := a.api.sumBy("apiserver_request_total", "resource", "verb", verb), b.api.sumBy("apiserver_request_total", "resource", "verb", verb)
		for k, v := range br {
			if d := v - ar[k]; d > 0 {
				c.apiByResourceMu[k] += d
			}
		}
	}
	c.apiAll = b.api.sum("apiserver_request_total") - a.api.sum("apiserver_request_total") -
		(b.api.sum("apiserver_request_total", "verb", "WATCH") - a.api.sum("apiserver_request_total", "verb", "WATCH"))
	ar, br := a.mgr.sumBy("controller_runtime_reconcile_total", "controller"), b.mgr.sumBy("controller_runtime_reconcile_total", "controller")
	for k, v := range br {
		if d := v - ar[k]; d > 0 {
			c.reconciles[k] = d
		}
	}
	return c
}

// MarshalJSON writes c into the raw results.
func (c cost) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{
		"deckhandRequests": c.mgrRequests, "deckhandByMethod": c.mgrByMethod, "kcmRequests": c.kcmRequests,
		"apiWrites": c.apiMutating, "apiRequests": c.apiAll, "reconciles": c.reconciles, "apiWritesByResource": c.apiByResourceMu,
	})
}
