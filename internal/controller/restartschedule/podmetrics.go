package restartschedule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
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
	body, err := l.client.RESTClient().Get().Namespace(namespace).Resource("pods").
		SetHeader("Accept", runtime.ContentTypeProtobuf+", "+runtime.ContentTypeJSON).DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	// Reduced once a list, not kept whole: a PodMetrics carries its pod's
	// labels and a quantity per resource, several times what the triggers
	// read, and every evaluation until the next list reads this map.
	usage, err := workingSetsOf(body)
	if err != nil {
		return nil, fmt.Errorf("decoding the PodMetrics of %s: %w", namespace, err)
	}
	n.at, n.usage = now, usage
	return n.usage, nil
}

// workingSetsOf reduces a PodMetricsList, as the API served it, to the
// memory working sets. A protobuf answer is decoded an item at a time: the
// whole list decoded at once was 37 MB of allocations at 10,000 pods, most
// of it alive together until reduced, which raised the heap the runtime
// lets grow before collecting (the RSS of the trigger cost benchmark).
func workingSetsOf(body []byte) (map[string]PodUsage, error) {
	if raw, ok := bytes.CutPrefix(body, protobufEnvelope); ok {
		return protobufWorkingSets(raw)
	}
	var list metricsv1beta1.PodMetricsList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	out := make(map[string]PodUsage, len(list.Items))
	for i := range list.Items {
		addWorkingSet(out, &list.Items[i])
	}
	return out, nil
}

// protobufEnvelope begins a Kubernetes protobuf answer, whose message is a
// runtime.Unknown wrapping the object's own encoding.
var protobufEnvelope = []byte{'k', '8', 's', 0}

// Field numbers of the messages walked (k8s.io/apimachinery runtime
// generated.proto, k8s.io/metrics v1beta1 generated.proto).
const (
	unknownRawField = 2 // runtime.Unknown.raw
	listItemsField  = 2 // PodMetricsList.items
)

func protobufWorkingSets(unknown []byte) (map[string]PodUsage, error) {
	var list []byte
	if err := eachField(unknown, unknownRawField, func(b []byte) error { list = b; return nil }); err != nil {
		return nil, err
	}
	out := map[string]PodUsage{}
	var pm metricsv1beta1.PodMetrics
	err := eachField(list, listItemsField, func(item []byte) error {
		pm = metricsv1beta1.PodMetrics{}
		if err := pm.Unmarshal(item); err != nil {
			return err
		}
		addWorkingSet(out, &pm)
		return nil
	})
	return out, err
}

// eachField calls fn with the bytes of each length-delimited field number
// num of the protobuf message msg, skipping the other fields.
func eachField(msg []byte, num protowire.Number, fn func([]byte) error) error {
	for len(msg) > 0 {
		n, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return protowire.ParseError(l)
		}
		msg = msg[l:]
		if n == num && typ == protowire.BytesType {
			v, l := protowire.ConsumeBytes(msg)
			if l < 0 {
				return protowire.ParseError(l)
			}
			if err := fn(v); err != nil {
				return err
			}
			msg = msg[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(n, typ, msg)
		if l < 0 {
			return protowire.ParseError(l)
		}
		msg = msg[l:]
	}
	return nil
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
