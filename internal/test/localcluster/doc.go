// Package localcluster starts and stops a real, local Kubernetes control plane
// on free loopback ports: etcd and kube-apiserver, and optionally
// kube-controller-manager, kube-scheduler and kwok with fake nodes.
//
// It is the single harness behind Deckhand's integration tests, end-to-end
// tests, benchmarks and `make run`. The binaries come from bin/k8s, which
// hack/k8s/build.sh builds from Go modules; nothing is downloaded at run time.
package localcluster
