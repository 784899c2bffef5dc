// Package localcluster starts and stops a real, local Kubernetes control plane
// on free loopback ports: etcd and kube-apiserver, and optionally
// kube-controller-manager, kube-scheduler and kwok with fake nodes.
//
// With Options.Metrics the pods on the fake nodes report simulated usage
// that real servers serve: metrics-server (metrics.k8s.io through the API
// server's aggregation layer, `kubectl top pods`) scraping kwok's kubelet
// resource metrics, and Prometheus scraping kwok's DCGM exporter
// (DCGM_FI_DEV_FB_USED). A pod's annotations set its usage, base + leak a
// second * age: SimMemoryWorkingSetAnnotation and
// SimMemoryLeakPerSecondAnnotation for its first container's working set,
// SimGPUMemoryUsedAnnotation and SimGPUMemoryLeakAnnotation for its GPU
// memory in MiB (metrics.go; docs/local-cluster-metrics.md).
//
// It is the single harness behind Deckhand's integration tests, end-to-end
// tests, benchmarks and `make run`. The binaries come from bin/k8s, which
// hack/k8s/build.sh (and `make metrics-binaries` for metrics-server and
// Prometheus) builds from Go modules; nothing is downloaded at run time.
package localcluster
