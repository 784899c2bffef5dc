package main

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// limitClients makes every client built from cfg share one token bucket of
// qps requests a second and burst at once: controller-runtime builds a REST
// client per resource type for its client and another per informer, and
// each would otherwise take its own bucket from cfg.QPS, so the process as a
// whole could send many times the limit. qps <= 0 leaves cfg unlimited; a
// burst <= 0 is 1.5 x qps.
//
// The returned config is for leader election: it keeps a bucket of its own
// of the same size, so that lease renewals never queue behind the
// controllers' requests and the manager keeps its lease under load.
func limitClients(cfg *rest.Config, qps float64, burst int) (leaderElection *rest.Config) {
	if qps <= 0 {
		return nil
	}
	if burst <= 0 {
		burst = int(qps * 1.5)
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	leaderElection = rest.CopyConfig(cfg)
	leaderElection.RateLimiter = nil
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, burst)
	return leaderElection
}
