package localcluster

import (
	"context"
	"encoding/json"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// podMetricsList is the part of metrics.k8s.io/v1beta1 PodMetricsList the
// test reads.
type podMetricsList struct {
	Items []struct {
		Metadata   metav1.ObjectMeta `json:"metadata"`
		Timestamp  metav1.Time       `json:"timestamp"`
		Containers []struct {
			Name  string              `json:"name"`
			Usage corev1.ResourceList `json:"usage"`
		} `json:"containers"`
	} `json:"items"`
}

// workingSet is one PodMetrics reading: the pod's first container's memory
// at the time metrics-server scraped it, and its other container's.
type workingSet struct {
	bytes        int64
	at           time.Time
	sidecarBytes int64
}

// TestMetricsFollowSimulatedUsage runs a flat and a leaking pod on a fake
// node of a cluster with Options.Metrics and reads their usage where a
// controller would: PodMetrics through the API server's aggregation layer
// (metrics-server, which scraped kwok's kubelet resource metrics) and
// DCGM_FI_DEV_FB_USED through Prometheus' query API (Prometheus, which
// scraped kwok's DCGM exporter). Each reading equals base + leak * pod age;
// the leaking pod's grows between readings, the flat pod's does not.
// `kubectl top pods` lists both.
func TestMetricsFollowSimulatedUsage(t *testing.T) {
	c, _ := startCluster(t, Options{FakeNodes: 1, Metrics: true})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	pods := c.Clientset().CoreV1().Pods(metav1.NamespaceDefault)

	const (
		baseMemory = 64 << 20
		leakMemory = 1 << 20 // a second
		baseGPU    = 1024.0  // MiB
		leakGPU    = 10.0    // MiB a second
	)
	specs := map[string]map[string]string{
		"flat": {
			SimMemoryWorkingSetAnnotation: "64Mi",
			SimGPUMemoryUsedAnnotation:    "1024",
		},
		"leaking": {
			SimMemoryWorkingSetAnnotation:    "64Mi",
			SimMemoryLeakPerSecondAnnotation: "1Mi",
			SimGPUMemoryUsedAnnotation:       "1024",
			SimGPUMemoryLeakAnnotation:       "10",
		},
	}
	created := map[string]time.Time{}
	for name, annotations := range specs {
		pod, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec: corev1.PodSpec{
				NodeName:   "kwok-node-0",
				Containers: []corev1.Container{{Name: "app", Image: "app:1"}, {Name: "sidecar", Image: "sidecar:1"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created[name] = pod.CreationTimestamp.Time
	}
	// age is what kwok measures a pod's age from: its creationTimestamp,
	// whole seconds.
	age := func(name string, at time.Time) float64 { return at.Sub(created[name]).Seconds() }

	readMemory := func(ctx context.Context) (map[string]workingSet, error) {
		body, err := c.Clientset().Discovery().RESTClient().Get().
			AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods").DoRaw(ctx)
		if err != nil {
			return nil, err
		}
		var list podMetricsList
		if err := json.Unmarshal(body, &list); err != nil {
			return nil, err
		}
		out := map[string]workingSet{}
		for _, pm := range list.Items {
			ws := workingSet{at: pm.Timestamp.Time}
			for _, ctr := range pm.Containers {
				switch ctr.Name {
				case "app":
					ws.bytes = ctr.Usage.Memory().Value()
				case "sidecar":
					ws.sidecarBytes = ctr.Usage.Memory().Value()
				}
			}
			out[pm.Metadata.Name] = ws
		}
		return out, nil
	}
	// checkMemory checks a reading against base + leak * age, within three
	// seconds' leak: metrics-server's timestamp of a scrape has whole
	// seconds, and kwok evaluates the usage a little after it.
	checkMemory := func(name string, ws workingSet, leak float64) {
		t.Helper()
		want := baseMemory + leak*age(name, ws.at)
		if math.Abs(float64(ws.bytes)-want) > 3*leak {
			t.Errorf("%s: working set %d bytes at %s (age %.1fs), want %.0f", name, ws.bytes, ws.at.Format(time.RFC3339), age(name, ws.at), want)
		}
		if sidecar := resource.MustParse(SimDefaultMemory); ws.sidecarBytes != sidecar.Value() {
			t.Errorf("%s: sidecar's working set %d bytes, want the default %s", name, ws.sidecarBytes, SimDefaultMemory)
		}
	}

	var first map[string]workingSet
	pollFor(t, ctx, 2*time.Minute, "PodMetrics of both pods", func(ctx context.Context) (bool, error) {
		m, err := readMemory(ctx)
		first = m
		return err == nil && len(m) == 2, nil
	})
	checkMemory("flat", first["flat"], 0)
	checkMemory("leaking", first["leaking"], leakMemory)

	var next map[string]workingSet
	pollFor(t, ctx, 3*MetricsServerResolution, "a later scrape of the leaking pod", func(ctx context.Context) (bool, error) {
		m, err := readMemory(ctx)
		next = m
		return err == nil && m["leaking"].at.After(first["leaking"].at), nil
	})
	checkMemory("flat", next["flat"], 0)
	checkMemory("leaking", next["leaking"], leakMemory)
	if next["flat"].bytes != first["flat"].bytes {
		t.Errorf("flat pod's working set changed: %d, then %d bytes", first["flat"].bytes, next["flat"].bytes)
	}
	if next["leaking"].bytes <= first["leaking"].bytes {
		t.Errorf("leaking pod's working set did not grow: %d, then %d bytes", first["leaking"].bytes, next["leaking"].bytes)
	}

	out, err := exec.CommandContext(ctx, filepath.Join(c.BinDir(), "kubectl"), "--kubeconfig", c.KubeconfigPath, "top", "pods", "-n", "default").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl top pods: %v\n%s", err, out)
	}
	for name := range specs {
		if !strings.Contains(string(out), name) {
			t.Errorf("kubectl top pods does not list %s:\n%s", name, out)
		}
	}

	// readGPU returns each pod's DCGM_FI_DEV_FB_USED and the bounds of the
	// ages it may have been scraped at: within a few scrape intervals
	// before the query.
	readGPU := func(ctx context.Context) (map[string]float64, time.Time, error) {
		at := time.Now()
		samples, err := c.QueryPrometheus(ctx, DCGMFramebufferUsedMetric+`{namespace="default"}`)
		if err != nil {
			return nil, at, err
		}
		out := map[string]float64{}
		for _, s := range samples {
			if s.Labels["container"] != "app" {
				t.Errorf("%s of %s has container %q, want the first container, app", DCGMFramebufferUsedMetric, s.Labels["pod"], s.Labels["container"])
			}
			out[s.Labels["pod"]] = s.Value
		}
		return out, at, nil
	}
	checkGPU := func(name string, got float64, at time.Time, leak float64) {
		t.Helper()
		// The newest sample is from a scrape at most a few intervals old
		// (more on a loaded machine).
		lo := baseGPU + leak*(age(name, at)-10*PrometheusScrapeInterval.Seconds())
		hi := baseGPU + leak*(age(name, at)+1)
		if got < lo || got > hi {
			t.Errorf("%s: %s %.1f at age %.1fs, want %.1f to %.1f", name, DCGMFramebufferUsedMetric, got, age(name, at), lo, hi)
		}
	}
	var gpu map[string]float64
	var gpuAt time.Time
	pollFor(t, ctx, time.Minute, DCGMFramebufferUsedMetric+" of both pods", func(ctx context.Context) (bool, error) {
		var err error
		gpu, gpuAt, err = readGPU(ctx)
		return err == nil && len(gpu) == 2, nil
	})
	checkGPU("flat", gpu["flat"], gpuAt, 0)
	checkGPU("leaking", gpu["leaking"], gpuAt, leakGPU)
	if gpu["flat"] != baseGPU {
		t.Errorf("flat pod's %s is %v, want %v", DCGMFramebufferUsedMetric, gpu["flat"], baseGPU)
	}

	firstLeak := gpu["leaking"]
	pollFor(t, ctx, 30*time.Second, "the leaking pod's GPU memory to grow", func(ctx context.Context) (bool, error) {
		var err error
		gpu, gpuAt, err = readGPU(ctx)
		return err == nil && gpu["leaking"] > firstLeak+2*leakGPU, nil
	})
	checkGPU("leaking", gpu["leaking"], gpuAt, leakGPU)
	if gpu["flat"] != baseGPU {
		t.Errorf("flat pod's %s is %v, want %v", DCGMFramebufferUsedMetric, gpu["flat"], baseGPU)
	}
}

// pollFor waits up to timeout for cond, failing t with what it waited for.
func pollFor(t *testing.T, ctx context.Context, timeout time.Duration, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, cond); err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

// TestKwokMetricsConfigDCGM: the DCGM exporter's series are served unless
// the cluster serves resource metrics only, and always on the one path of
// the node's resource metrics: kwok unregisters a node's series of one path
// when it serves another, so two paths would take each other's pods out of
// their answers.
func TestKwokMetricsConfigDCGM(t *testing.T) {
	for name, tc := range map[string]struct {
		dcgm bool
		want bool
	}{
		"with the DCGM exporter": {dcgm: true, want: true},
		"resource metrics only":  {dcgm: false, want: false},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := kwokMetricsConfig(tc.dcgm)
			if got := strings.Contains(cfg, DCGMFramebufferUsedMetric); got != tc.want {
				t.Errorf("DCGM series %s served: %v, want %v", DCGMFramebufferUsedMetric, got, tc.want)
			}
			if n := strings.Count(cfg, "kind: Metric\n"); n != 1 {
				t.Errorf("%d kwok Metrics, want 1 (one path a node):\n%s", n, cfg)
			}
			if !strings.Contains(cfg, kwokResourceMetricsPath) {
				t.Errorf("resource metrics path %s not served", kwokResourceMetricsPath)
			}
		})
	}
}
