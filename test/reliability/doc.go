// Package reliability tests Deckhand under faults on a real local control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)
// with the deckhand binary running as a separate process: SIGKILLs at
// random moments with invariants checked from watches, leader failover and
// planned stops behind a kube-proxy-like proxy, an API server restart, an
// unavailable webhook, a table of invalid objects, and the transport
// security of the webhook and metrics servers.
//
// `go test` (make test) runs short versions. DECKHAND_STRESS=1 (make stress)
// runs the long ones: 300 pods, at least 20 kills per scenario; with
// DECKHAND_RELIABILITY_REPORT=<file> the figures are appended to that file.
package reliability
