package localcluster

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

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

// kwokResourceMetricsPath is kwok's kubelet /metrics/resource of a fake
// node, {nodeName} standing for the node's name.
const kwokResourceMetricsPath = "/metrics/nodes/{nodeName}/metrics/resource"

// kwokNodeMetricName names the one kwok Metric of a fake node: its
// kubelet's resource metrics and its DCGM exporter's series on one path,
// the label kwok's Prometheus discovery gives its targets (metrics_name).
//
// Note: kwok (v0.8.0) keeps one registry per fake node for all of the
// node's metric paths, and serving one path unregisters the series of the
// others first; two paths scraped at once (metrics-server and Prometheus)
// took whole nodes' pods out of each other's answers. On one path both
// scrapers ask for the same series.
const kwokNodeMetricName = "kubelet-resource-metrics"

// ResourceMetricsPath is the path of kwok's resource metrics of the fake
// node named node, the value of its ResourceMetricsPathAnnotation.
func ResourceMetricsPath(node string) string {
	return strings.ReplaceAll(kwokResourceMetricsPath, "{nodeName}", node)
}

// kwokMetricsConfig returns the kwok objects (kwok.x-k8s.io/v1alpha1) that
// simulate usage from the annotations above: a ClusterResourceUsage for
// every pod, and a Metric serving it as the kubelet's /metrics/resource
// does (the metric names and labels metrics-server decodes) with, when dcgm,
// DCGMFramebufferUsedMetric beside them (metrics-server skips series it
// does not know).
func kwokMetricsConfig(dcgm bool) string {
	// annotation returns a CEL expression: the annotation's value converted
	// by conv when the pod has it, otherwise absent.
	annotation := func(name, conv, absent string) string {
		return fmt.Sprintf(`(%q in pod.metadata.annotations ? %s(pod.metadata.annotations[%q]) : %s)`, name, conv, name, absent)
	}
	memory := fmt.Sprintf(`container.name != pod.spec.containers[0].name ? Quantity(%q) : %s + %s * pod.SinceSecond()`,
		SimDefaultMemory,
		annotation(SimMemoryWorkingSetAnnotation, "Quantity", fmt.Sprintf("Quantity(%q)", SimDefaultMemory)),
		annotation(SimMemoryLeakPerSecondAnnotation, "Quantity", `Quantity("0")`))
	gpu := fmt.Sprintf(`%s + %s * pod.SinceSecond()`,
		annotation(SimGPUMemoryUsedAnnotation, "double", "0.0"),
		annotation(SimGPUMemoryLeakAnnotation, "double", "0.0"))

	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata:
  name: deckhand-simulated-usage
spec:
  usages:
  - usage:
      cpu:
        expression: 'Quantity("1m")'
      memory:
        expression: %q
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Metric
metadata:
  name: %s
spec:
  path: %q
  metrics:
`, memory, kwokNodeMetricName, kwokResourceMetricsPath)
	containerLabels := `    labels:
    - name: container
      value: container.name
    - name: namespace
      value: pod.metadata.namespace
    - name: pod
      value: pod.metadata.name
`
	podLabels := `    labels:
    - name: namespace
      value: pod.metadata.namespace
    - name: pod
      value: pod.metadata.name
`
	// The kubelet's own metrics of this endpoint, each with the labels of
	// its dimension.
	for _, m := range []struct{ name, kind, dimension, labels, value string }{
		{"scrape_error", "gauge", "node", "", "0"},
		// Seconds since the pod's creation: metrics-server only compares
		// start times with each other, to notice a restarted container.
		{"container_start_time_seconds", "gauge", "container", containerLabels, "pod.SinceSecond()"},
		{"container_cpu_usage_seconds_total", "counter", "container", containerLabels, `pod.CumulativeUsage("cpu", container.name)`},
		{"container_memory_working_set_bytes", "gauge", "container", containerLabels, `pod.Usage("memory", container.name)`},
		{"pod_cpu_usage_seconds_total", "counter", "pod", podLabels, `pod.CumulativeUsage("cpu")`},
		{"pod_memory_working_set_bytes", "gauge", "pod", podLabels, `pod.Usage("memory")`},
		{"node_cpu_usage_seconds_total", "counter", "node", "", `node.CumulativeUsage("cpu")`},
		{"node_memory_working_set_bytes", "gauge", "node", "", `node.Usage("memory")`},
	} {
		fmt.Fprintf(&b, "  - name: %s\n    help: %s\n    kind: %s\n    dimension: %s\n%s    value: %q\n", m.name, m.name, m.kind, m.dimension, m.labels, m.value)
	}
	if dcgm {
		fmt.Fprintf(&b, `  - name: %s
    help: Framebuffer memory used (in MiB).
    kind: gauge
    dimension: pod
    labels:
    - name: gpu
      value: '"0"'
    - name: namespace
      value: pod.metadata.namespace
    - name: pod
      value: pod.metadata.name
    - name: container
      value: pod.spec.containers[0].name
    value: %q
`, DCGMFramebufferUsedMetric, gpu)
	}
	return b.String()
}

// kwokServerArgs are kwok's flags that serve the fake nodes' kubelet
// endpoints on a free loopback port, with the API server's serving
// certificate (for 127.0.0.1). The nodes' InternalIP and kubelet port in
// their status are that address, where metrics-server looks for a kubelet.
func (c *Cluster) kwokServerArgs() ([]string, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	c.kwokPort = port
	pki := filepath.Join(c.dir, "pki")
	return []string{
		"--server-address", fmt.Sprintf("127.0.0.1:%d", port),
		"--tls-cert-file", filepath.Join(pki, "tls.crt"),
		"--tls-private-key-file", filepath.Join(pki, "tls.key"),
		"--node-ip", "127.0.0.1",
		"--node-port", strconv.Itoa(port),
	}, nil
}
