// Package e2e holds Deckhand's end-to-end tests: a full local cluster (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, kwok fake nodes)
// and the deckhand binary running as its own process, as users run it.
package e2e
