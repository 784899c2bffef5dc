package restartschedule

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// WorkingSet of each container, in bytes.
	WorkingSet map[string]int64
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
	list, err := l.client.PodMetricses(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	// Reduced once a list, not kept whole: a PodMetrics carries its pod's
	// labels and a quantity per resource, several times what the triggers
	// read, and every evaluation until the next list reads this map.
	n.at, n.usage = now, workingSets(list.Items)
	return n.usage, nil
}

// workingSets reduces PodMetrics to their memory working sets.
func workingSets(items []metricsv1beta1.PodMetrics) map[string]PodUsage {
	out := make(map[string]PodUsage, len(items))
	for i := range items {
		pm := &items[i]
		u := PodUsage{At: pm.Timestamp.Time, WorkingSet: make(map[string]int64, len(pm.Containers))}
		for _, c := range pm.Containers {
			if q, ok := c.Usage[corev1.ResourceMemory]; ok {
				u.WorkingSet[c.Name] = q.Value()
			}
		}
		out[pm.Name] = u
	}
	return out
}
