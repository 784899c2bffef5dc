package restartschedule

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
	"k8s.io/utils/clock"
)

// PodMetricsSource reads the working sets of a namespace's pods from the
// resource metrics API (metrics.k8s.io PodMetrics).
type PodMetricsSource interface {
	// WorkingSets returns each pod's latest sample, by pod name. The map
	// may be shared with other callers until the next list: read-only.
	WorkingSets(ctx context.Context, namespace string) (map[string]PodUsage, error)
}

// PodUsage is one pod's PodMetrics sample, reduced to what memory triggers
// read.
type PodUsage struct {
	At time.Time
	// Containers' working sets: a slice, where a map a pod was 3.6 MB of
	// the manager's live heap at 10,000 pods.
	Containers []ContainerUsage
}

// ContainerUsage is one container's working set, in bytes.
type ContainerUsage struct {
	Name       string
	WorkingSet int64
}

// WorkingSet is the named container's working set, if sampled.
func (u PodUsage) WorkingSet(container string) (int64, bool) {
	for _, c := range u.Containers {
		if c.Name == container {
			return c.WorkingSet, true
		}
	}
	return 0, false
}

// DefaultMetricsResolution is how long a namespace's PodMetrics list is
// reused: metrics-server's own default resolution is 60s, so a shorter
// one only re-reads the same samples.
const DefaultMetricsResolution = 15 * time.Second

// Memory triggers list the PodMetrics of their namespace (read only; no
// watch: the API serves none).
// +kubebuilder:rbac:groups=metrics.k8s.io,resources=pods,verbs=get;list,roleName=manager-restartschedule-role

// podMetricsLister lists a namespace's PodMetrics at most once per
// resolution, whatever number of schedules and pods ask: at 50,000 pods, a
// request per pod would be 50,000 requests a minute to the aggregated API.
type podMetricsLister struct {
	client     metricsclient.MetricsV1beta1Interface
	clock      clock.PassiveClock
	resolution time.Duration

	mu   sync.Mutex
	byNS map[string]*namespaceMetrics
}

type namespaceMetrics struct {
	// mu serialises the lists of one namespace, so that schedules asking
	// at once share one request.
	mu    sync.Mutex
	at    time.Time
	usage map[string]PodUsage
}

// NewPodMetricsSource returns a PodMetricsSource reading the resource
// metrics API through cfg, one list per namespace per resolution.
func NewPodMetricsSource(cfg *rest.Config, clk clock.PassiveClock, resolution time.Duration) (PodMetricsSource, error) {
	c, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if resolution <= 0 {
		resolution = DefaultMetricsResolution
	}
	return &podMetricsLister{client: c, clock: clk, resolution: resolution, byNS: map[string]*namespaceMetrics{}}, nil
}

func (l *podMetricsLister) WorkingSets(ctx context.Context, namespace string) (map[string]PodUsage, error) {
	l.mu.Lock()
	for ns, m := range l.byNS {
		// A namespace no schedule asks about any more is forgotten; one
		// being listed is not.
		if ns != namespace && m.mu.TryLock() {
			if l.clock.Since(m.at) > 10*l.resolution {
				delete(l.byNS, ns)
			}
			m.mu.Unlock()
		}
	}
	n := l.byNS[namespace]
	if n == nil {
		n = &namespaceMetrics{}
		l.byNS[namespace] = n
	}
	l.mu.Unlock()
	n.mu.Lock()
	defer n.mu.Unlock()
	now := l.clock.Now()
	if !n.at.IsZero() && now.Sub(n.at) < l.resolution {
		return n.usage, nil
	}
	// The previous list's working sets are not kept through the next
	// one's decoding: the reconciles that read them hold their own
	// reference, and the map is the largest thing a memory trigger keeps.
	n.usage = nil
	body, err := l.client.RESTClient().Get().Namespace(namespace).Resource("pods").
		SetHeader("Accept", runtime.ContentTypeProtobuf+", "+runtime.ContentTypeJSON).Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	// Reduced once a list, not kept whole: a PodMetrics carries its pod's
	// labels and a quantity per resource, several times what the triggers
	// read, and every evaluation until the next list reads this map.
	usage, err := workingSetsFrom(body)
	if err != nil {
		return nil, fmt.Errorf("decoding the PodMetrics of %s: %w", namespace, err)
	}
	n.at, n.usage = now, usage
	return n.usage, nil
}

// workingSetsFrom reduces a PodMetricsList, as the API serves it, to the
// memory working sets. A protobuf answer is read from the connection an
// item at a time: the whole list decoded at once was 37 MB of allocations
// at 10,000 pods, and the answer read whole before its items were walked
// was about 260 bytes a pod, and twice that allocated growing the buffer,
// at every resolution; either raised the heap the runtime lets grow before
// collecting (the RSS of the trigger cost benchmark).
func workingSetsFrom(r io.Reader) (map[string]PodUsage, error) {
	br := bufio.NewReaderSize(r, 32<<10)
	if head, err := br.Peek(len(protobufEnvelope)); err == nil && bytes.Equal(head, protobufEnvelope) {
		_, _ = br.Discard(len(protobufEnvelope))
		return protobufWorkingSets(&protoStream{r: br, left: -1})
	}
	var list metricsv1beta1.PodMetricsList
	if err := json.NewDecoder(br).Decode(&list); err != nil {
		return nil, err
	}
	out := make(map[string]PodUsage, len(list.Items))
	for i := range list.Items {
		addWorkingSet(out, &list.Items[i])
	}
	return out, nil
}

// addWorkingSet adds pm's memory working sets to out.
func addWorkingSet(out map[string]PodUsage, pm *metricsv1beta1.PodMetrics) {
	u := PodUsage{At: pm.Timestamp.Time, Containers: make([]ContainerUsage, 0, len(pm.Containers))}
	for _, c := range pm.Containers {
		if q, ok := c.Usage[corev1.ResourceMemory]; ok {
			u.Containers = append(u.Containers, ContainerUsage{Name: c.Name, WorkingSet: q.Value()})
		}
	}
	out[pm.Name] = u
}
