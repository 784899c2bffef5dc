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
// The fake nodes play the kubelet as far as rollouts see it
// (kwokstages/*.yaml; docs/development.md, "The fake node"): an image on
// UnpullableRegistry (UnpullableImage) fails to pull, ErrImagePull then
// ImagePullBackOff; startup probes and readiness probes' initialDelaySeconds
// hold a container not started or not ready; a postStart hook that sleeps
// (lifecycle.postStart.sleep.seconds) holds it ContainerCreating; an
// in-place resize beyond FakeNodeResizeRoom comes back Deferred, and a CPU
// resize of a Guaranteed pod on a node named with
// StaticCPUManagerNodePrefix comes back Infeasible.
//
// It is the single harness behind Deckhand's integration tests, end-to-end
// tests, benchmarks and `make run`. The binaries come from bin/k8s, which
// hack/k8s/build.sh (and `make metrics-binaries` for metrics-server and
// Prometheus) builds from Go modules; nothing is downloaded at run time.
package localcluster
