package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
	sidecarsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/sidecarset"
)

// sidecarSets returns n SidecarSets of which the first selects app=web (a
// logging sidecar sharing the pod's volumes) and the others select nothing
// the pod has.
func sidecarSets(n int) []*deckhandv1alpha1.SidecarSet {
	var out []*deckhandv1alpha1.SidecarSet
	for i := range n {
		app := "web"
		if i > 0 {
			app = fmt.Sprintf("other-%d", i)
		}
		s := &deckhandv1alpha1.SidecarSet{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("set-%03d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)), Generation: 1},
			Spec: deckhandv1alpha1.SidecarSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
				Containers: []deckhandv1alpha1.SidecarContainer{{
					Container:         corev1.Container{Name: fmt.Sprintf("sidecar-%d", i), Image: "registry.example.com/logging/agent:1.0"},
					ShareVolumePolicy: deckhandv1alpha1.ShareVolumePolicy{Type: deckhandv1alpha1.ShareVolumePolicyEnabled},
				}},
			},
		}
		sidecarsetwebhook.SetDefaults(s)
		out = append(out, s)
	}
	return out
}

func lister(b *testing.B, sets []*deckhandv1alpha1.SidecarSet) *sidecarcontrol.Lister {
	ss := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, sidecarcontrol.Indexers())
	for _, s := range sets {
		if err := ss.Add(s); err != nil {
			b.Fatal(err)
		}
	}
	nsIdx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	_ = nsIdx.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{"env": "prod"}}})
	return sidecarcontrol.NewLister(ss, nsIdx, sidecarcontrol.Options{})
}

func podRequest(b *testing.B) admission.Request {
	p := testutil.LargePod()
	p.Namespace = "prod"
	raw, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Create, Namespace: "prod",
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: raw},
	}}
}

func benchHandler(b *testing.B, h admission.Handler, wantPatch bool) {
	req := podRequest(b)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		resp := h.Handle(ctx, req)
		if !resp.Allowed || (wantPatch && len(resp.Patch) == 0 && len(resp.Patches) == 0) {
			b.Fatalf("unexpected response: allowed=%v patch=%d", resp.Allowed, len(resp.Patch)+len(resp.Patches))
		}
	}
	// CPU time (user+system, every thread: garbage collection included) per
	// op: on a shared machine wall time also counts the time spent waiting
	// for a CPU, CPU time far less so.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkInject1of1: Deckhand's pod injection handler, one SidecarSet,
// which matches the 10-container pod.
func BenchmarkInject1of1(b *testing.B) {
	benchHandler(b, &inject.Handler{Lister: lister(b, sidecarSets(1))}, true)
}

// BenchmarkInject1of100: 100 SidecarSets, one of which matches.
func BenchmarkInject1of100(b *testing.B) {
	benchHandler(b, &inject.Handler{Lister: lister(b, sidecarSets(100))}, true)
}

// BenchmarkInject1of1Hot: BenchmarkInject1of1 with the sidecar
// HotUpgrade, so that it is injected as two containers with their version
// annotations.
func BenchmarkInject1of1Hot(b *testing.B) {
	sets := sidecarSets(1)
	sets[0].Spec.Containers[0].UpgradeStrategy = &deckhandv1alpha1.SidecarContainerUpgradeStrategy{
		UpgradeType: deckhandv1alpha1.HotUpgrade, HotUpgradeEmptyImage: "registry.example.com/logging/empty:1.0"}
	benchHandler(b, &inject.Handler{Lister: lister(b, sets)}, true)
}

// podAnnotator is the smallest useful typed defaulter: it adds one annotation.
type podAnnotator struct{}

func (podAnnotator) Default(_ context.Context, p *corev1.Pod) error {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations["example.com/defaulted"] = "true"
	return nil
}

// BenchmarkBaselineCRDefaulter is the baseline: controller-runtime's typed
// defaulter webhook (decode the pod, call Default, marshal, diff into a JSON
// patch) on the same request, with a defaulter that adds one annotation.
func BenchmarkBaselineCRDefaulter(b *testing.B) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	benchHandler(b, admission.WithDefaulter[*corev1.Pod](scheme, podAnnotator{}), true)
}
