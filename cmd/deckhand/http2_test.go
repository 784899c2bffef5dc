package main

import "testing"

// TestResolveHTTP2: the deprecated --enable-http2 sets both servers unless
// their own flag is given; without it the defaults (webhook on, metrics
// off) or the given flags stand.
func TestResolveHTTP2(t *testing.T) {
	for _, c := range []struct {
		name                     string
		given                    []string
		legacy, webhook, metrics bool
		wantWebhook, wantMetrics bool
	}{
		{name: "defaults", webhook: true, wantWebhook: true},
		{name: "enable-http2=false turns the webhook's off", given: []string{"enable-http2"}, webhook: true, wantWebhook: false},
		{name: "enable-http2=true turns both on", given: []string{"enable-http2"}, legacy: true, webhook: true, wantWebhook: true, wantMetrics: true},
		{name: "webhook-http2 given wins", given: []string{"enable-http2", "webhook-http2"}, webhook: true, wantWebhook: true},
		{name: "metrics-http2 given wins", given: []string{"enable-http2", "metrics-http2"}, legacy: true, webhook: true, wantWebhook: true},
		{name: "new flags alone", given: []string{"webhook-http2", "metrics-http2"}, metrics: true, wantMetrics: true},
	} {
		given := map[string]bool{}
		for _, g := range c.given {
			given[g] = true
		}
		webhook, metrics := resolveHTTP2(given, c.legacy, c.webhook, c.metrics)
		if webhook != c.wantWebhook || metrics != c.wantMetrics {
			t.Errorf("%s: webhook %t, metrics %t; want %t, %t", c.name, webhook, metrics, c.wantWebhook, c.wantMetrics)
		}
	}
}
