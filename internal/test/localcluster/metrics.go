package localcluster

// Simulated usage: what a pod on a fake node reports, set by annotations on
// the pod. kwok evaluates them (CEL expressions of its ClusterResourceUsage
// and Metric objects, kwokmetrics/) each time it is scraped, so a value
// that leaks grows with the pod's age, measured from its creationTimestamp:
//
//	value = base + leak per second * age in seconds
//
// The memory annotations are the working set of the pod's first container
// (spec.containers[0]) as the kubelet's /metrics/resource endpoint reports
// it, and so as metrics-server serves it (PodMetrics of metrics.k8s.io and
// `kubectl top pods`). The pod's other containers use SimDefaultMemory.
//
// The GPU-memory annotations are the frame buffer in use on the GPU of the
// pod's first container, as NVIDIA's DCGM exporter reports it to Prometheus:
// DCGMFramebufferUsedMetric{namespace, pod, container} in MiB. A pod without
// them reports 0.
const (
	// SimMemoryWorkingSetAnnotation is the working set at the pod's
	// creation, a Kubernetes quantity of bytes ("64Mi"); SimDefaultMemory
	// when absent.
	SimMemoryWorkingSetAnnotation = "sim.deckhand.dev/memory-working-set"
	// SimMemoryLeakPerSecondAnnotation is how much the working set grows a
	// second, a quantity of bytes ("1Mi"); 0 when absent.
	SimMemoryLeakPerSecondAnnotation = "sim.deckhand.dev/memory-leak-per-second"
	// SimGPUMemoryUsedAnnotation is the GPU frame buffer in use at the pod's
	// creation, a number of MiB ("1024"); 0 when absent.
	SimGPUMemoryUsedAnnotation = "sim.deckhand.dev/gpu-memory-used-mib"
	// SimGPUMemoryLeakAnnotation is how much the GPU frame buffer in use
	// grows a second, a number of MiB ("2.5"); 0 when absent.
	SimGPUMemoryLeakAnnotation = "sim.deckhand.dev/gpu-memory-leak-mib-per-second"

	// SimDefaultMemory is the working set of a container no annotation
	// describes (kwok's own default).
	SimDefaultMemory = "1Mi"

	// DCGMFramebufferUsedMetric is the DCGM exporter's per-GPU frame buffer
	// in use, in MiB, labelled with the namespace, pod and container the GPU
	// is assigned to.
	DCGMFramebufferUsedMetric = "DCGM_FI_DEV_FB_USED"

	// ResourceMetricsPathAnnotation on a node is the path of its kubelet's
	// resource metrics that metrics-server scrapes in place of
	// /metrics/resource: on a fake node, kwok's endpoint for that node.
	ResourceMetricsPathAnnotation = "metrics.k8s.io/resource-metrics-path"
)
