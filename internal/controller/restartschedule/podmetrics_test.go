package restartschedule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"testing"
	"testing/iotest"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// A PodMetricsList reduces to the same working sets whether the API
// answered in protobuf (decoded an item at a time) or in JSON.
func TestWorkingSetsFrom(t *testing.T) {
	// Nanoseconds, which metav1.Time drops in both encodings.
	at := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 6789, time.UTC))
	list := &metricsv1beta1.PodMetricsList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}}
	want := map[string]PodUsage{}
	for i := range 50 {
		name := fmt.Sprintf("web-%d", i)
		pm := metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: map[string]string{"app": "web"}},
			Timestamp: at, Window: metav1.Duration{Duration: 10 * time.Second}}
		var ws []ContainerUsage
		for _, c := range []string{"app", "sidecar"} {
			mem := int64(i+1) << 20
			if c == "sidecar" {
				mem = 3 << 20
			}
			pm.Containers = append(pm.Containers, metricsv1beta1.ContainerMetrics{Name: c, Usage: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: *resource.NewQuantity(mem, resource.BinarySI)}})
			ws = append(ws, ContainerUsage{c, mem})
		}
		list.Items = append(list.Items, pm)
		want[name] = PodUsage{At: at.Truncate(time.Second), Containers: ws}
	}
	// A container without a memory sample is left out; a pod without one
	// has no container.
	list.Items = append(list.Items, metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: "cpu-only"}, Timestamp: at,
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
		metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Name: "starting"}, Timestamp: at})
	want["cpu-only"] = PodUsage{At: at.Truncate(time.Second)}
	want["starting"] = PodUsage{At: at.Truncate(time.Second)}
	pb := protobufAnswer(t, list)
	js, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]io.Reader{"protobuf": bytes.NewReader(pb), "JSON": bytes.NewReader(js),
		"protobuf, a byte at a time": iotest.OneByteReader(bytes.NewReader(pb))} {
		got, err := workingSetsFrom(body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !maps.EqualFunc(got, want, func(a, b PodUsage) bool { return a.At.Equal(b.At) && slices.Equal(a.Containers, b.Containers) }) {
			t.Errorf("%s: %d pods %v, want %d", name, len(got), got["web-0"], len(want))
		}
	}
	// Any byte of the answer changed: an error or a map, never a panic nor
	// an allocation past maxPodMetricsBytes.
	for i := 4; i < len(pb); i += 7 {
		for _, b := range []byte{0x00, 0x7f, 0xff} {
			bad := bytes.Clone(pb)
			bad[i] = b
			_, _ = workingSetsFrom(bytes.NewReader(bad))
		}
	}
	for _, cut := range []int{3, 40, len(pb) / 2} {
		if _, err := workingSetsFrom(bytes.NewReader(pb[:len(pb)-cut])); err == nil {
			t.Errorf("a protobuf answer cut %d bytes short decoded without an error", cut)
		}
	}
	// The protobuf answer is reduced with an allocation a pod (its name)
	// and two a memory sample (its quantity's text, the pod's slice), and
	// a few for the map and the reading, not by decoding each PodMetrics
	// (24 allocations a pod of one container, when measured).
	if a, bound := testing.AllocsPerRun(5, func() { _, _ = workingSetsFrom(bytes.NewReader(pb)) }), len(list.Items)+2*100+32; a > float64(bound) {
		t.Errorf("reducing %d pods (100 memory samples) allocated %.0f times, want at most %d", len(list.Items), a, bound)
	}
}

// BenchmarkWorkingSetsFrom reduces a 10,000-pod protobuf answer (pods
// labelled as a StatefulSet's are) by walking it, and, for comparison, by
// decoding each item into a PodMetrics as the generated code does.
func BenchmarkWorkingSetsFrom(b *testing.B) {
	list := &metricsv1beta1.PodMetricsList{}
	for i := range 10000 {
		list.Items = append(list.Items, metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cost-%d-%d", i/100, i%100), Namespace: "triggercost",
				Labels: map[string]string{"fleet": "cost", "apps.kubernetes.io/pod-index": fmt.Sprint(i % 100),
					"controller-revision-hash": "cost-5d8f9c7b6", "statefulset.kubernetes.io/pod-name": fmt.Sprintf("cost-%d-%d", i/100, i%100)}},
			Timestamp: metav1.Now(), Window: metav1.Duration{Duration: 10 * time.Second},
			Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("65536Ki")}}}})
	}
	pb := protobufAnswer(b, list)
	b.Run("walked", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := workingSetsFrom(bytes.NewReader(pb)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoded per item", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			raw, err := lastBytes(pb[len(protobufEnvelope):], unknownRawField)
			if err != nil {
				b.Fatal(err)
			}
			out := map[string]PodUsage{}
			if err := eachField(raw, func(num protowire.Number, item []byte, _ uint64) error {
				if num != listItemsField {
					return nil
				}
				var pm metricsv1beta1.PodMetrics
				if err := pm.Unmarshal(item); err != nil {
					return err
				}
				addWorkingSet(out, &pm)
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// protobufAnswer is list as the API server answers it in protobuf.
func protobufAnswer(tb testing.TB, list *metricsv1beta1.PodMetricsList) []byte {
	tb.Helper()
	scheme := runtime.NewScheme()
	if err := metricsv1beta1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	list.SetGroupVersionKind(metricsv1beta1.SchemeGroupVersion.WithKind("PodMetricsList"))
	pb, err := runtime.Encode(protobuf.NewSerializer(scheme, scheme), list)
	if err != nil {
		tb.Fatal(err)
	}
	return pb
}
