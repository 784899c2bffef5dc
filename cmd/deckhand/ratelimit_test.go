package main

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// restClients builds a REST client for each gvk the way controller-runtime's
// client and informers do (one per resource type).
func restClients(t *testing.T, cfg *rest.Config, gvks ...schema.GroupVersionKind) []*rest.RESTClient {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out []*rest.RESTClient
	for _, gvk := range gvks {
		c, err := apiutil.RESTClientForGVK(gvk, false, false, cfg, serializer.NewCodecFactory(scheme), hc)
		if err != nil {
			t.Fatal(err)
		}
		rc, ok := c.(*rest.RESTClient)
		if !ok {
			t.Fatalf("RESTClientForGVK(%s) returned a %T", gvk, c)
		}
		out = append(out, rc)
	}
	return out
}

func TestLimitClientsSharesOneBucket(t *testing.T) {
	pods := schema.GroupVersionKind{Version: "v1", Kind: "Pod"}
	deployments := schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

	cfg := &rest.Config{Host: "https://127.0.0.1:6443"}
	le := limitClients(cfg, 20, 30)
	if cfg.RateLimiter == nil || cfg.RateLimiter.QPS() != 20 {
		t.Fatalf("rate limiter %v, want one of 20 QPS", cfg.RateLimiter)
	}
	cs := restClients(t, cfg, pods, deployments)
	for i, c := range cs {
		if c.GetRateLimiter() != cfg.RateLimiter {
			t.Errorf("client %d has a rate limiter of its own: the process would exceed --kube-api-qps", i)
		}
	}
	if le == nil || le.RateLimiter != nil || le.QPS != 20 || le.Burst != 30 {
		t.Fatalf("leader-election config %+v, want QPS 20, burst 30 and no shared limiter", le)
	}
	if lc := restClients(t, le, pods)[0]; lc.GetRateLimiter() == cfg.RateLimiter || lc.GetRateLimiter() == nil {
		t.Errorf("leader election's client must have a bucket of its own, got %v", lc.GetRateLimiter())
	}

	// The default burst is 1.5 x QPS; no QPS leaves the config unlimited.
	cfg = &rest.Config{Host: "https://127.0.0.1:6443"}
	limitClients(cfg, 10, 0)
	if cfg.Burst != 15 {
		t.Errorf("burst %d, want 15", cfg.Burst)
	}
	cfg = &rest.Config{Host: "https://127.0.0.1:6443", QPS: -1}
	if le := limitClients(cfg, 0, 0); le != nil || cfg.RateLimiter != nil || cfg.QPS != -1 {
		t.Errorf("no --kube-api-qps changed the config: %+v", cfg)
	}
}
