package bench

import (
	"context"
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/deckhand-dev/deckhand/internal/inject"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/test/typedinject"
)

// The pod webhook's hand-written fast path against the ordinary typed way,
// for the 10-container pod and one SidecarSet that shares the pod's
// volumes: the same pod, the same SidecarSet, the same resulting pod (each
// benchmark checks that first). docs/sidecarset.md records the numbers.

// BenchmarkPatchFastPath: the production handler (internal/inject/podjson reads
// the pod, the patch is written from pre-encoded fragments).
func BenchmarkPatchFastPath(b *testing.B) {
	l := lister(b, sidecarSets(1))
	h := &inject.Handler{Lister: l}
	req := podRequest(b)
	ctx := context.Background()
	checkSamePod(b, req.Object.Raw, h.Handle(ctx, req).Patch, l, typedPartialPatch)
	measure(b, func() {
		if resp := h.Handle(ctx, req); len(resp.Patch) == 0 {
			b.Fatal("nothing injected")
		}
	})
}

// BenchmarkPatchTypedPartial: decode only what injection reads (metadata
// and the five lists it appends to) into typed structs, inject with typed
// code, encode, and diff with controller-runtime's PatchResponseFromRaw.
func BenchmarkPatchTypedPartial(b *testing.B) {
	benchTyped(b, typedPartialPatch)
}

// BenchmarkPatchTypedFull: the same with the whole pod decoded.
func BenchmarkPatchTypedFull(b *testing.B) {
	benchTyped(b, typedFullPatch)
}

type typedPatcher func(l *sidecarcontrol.Lister, ns string, raw []byte) ([]byte, error)

func benchTyped(b *testing.B, patcher typedPatcher) {
	l := lister(b, sidecarSets(1))
	raw := podRequest(b).Object.Raw
	fast := (&inject.Handler{Lister: l}).Handle(context.Background(), podRequest(b)).Patch
	checkSamePod(b, raw, fast, l, patcher)
	measure(b, func() {
		if p, err := patcher(l, "prod", raw); err != nil || len(p) == 0 {
			b.Fatalf("nothing injected: %v", err)
		}
	})
}

// measure runs op b.N times, reporting allocations and CPU time per op
// besides wall time (see benchHandler).
func measure(b *testing.B, op func()) {
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for range b.N {
		op()
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// partialPod is what injection reads and writes of a pod.
type partialPod struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		InitContainers   []corev1.Container            `json:"initContainers,omitempty"`
		Containers       []corev1.Container            `json:"containers"`
		Volumes          []corev1.Volume               `json:"volumes,omitempty"`
		ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
		ReadinessGates   []corev1.PodReadinessGate     `json:"readinessGates,omitempty"`
	} `json:"spec"`
}

// typedPartialPatch diffs the partial pod before and after injection; the
// paths of the resulting patch are the same in the whole pod.
func typedPartialPatch(l *sidecarcontrol.Lister, ns string, raw []byte) ([]byte, error) {
	var pp partialPod
	if err := json.Unmarshal(raw, &pp); err != nil {
		return nil, err
	}
	before, err := json.Marshal(&pp)
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{ObjectMeta: pp.Metadata, Spec: corev1.PodSpec{
		InitContainers: pp.Spec.InitContainers, Containers: pp.Spec.Containers,
		Volumes: pp.Spec.Volumes, ImagePullSecrets: pp.Spec.ImagePullSecrets, ReadinessGates: pp.Spec.ReadinessGates,
	}}
	typedinject.Inject(l, ns, pod)
	pp.Metadata = pod.ObjectMeta
	pp.Spec.InitContainers, pp.Spec.Containers = pod.Spec.InitContainers, pod.Spec.Containers
	pp.Spec.Volumes, pp.Spec.ImagePullSecrets, pp.Spec.ReadinessGates = pod.Spec.Volumes, pod.Spec.ImagePullSecrets, pod.Spec.ReadinessGates
	after, err := json.Marshal(&pp)
	if err != nil {
		return nil, err
	}
	return patchJSON(admission.PatchResponseFromRaw(before, after))
}

func typedFullPatch(l *sidecarcontrol.Lister, ns string, raw []byte) ([]byte, error) {
	pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		return nil, err
	}
	typedinject.Inject(l, ns, pod)
	after, err := json.Marshal(pod)
	if err != nil {
		return nil, err
	}
	return patchJSON(admission.PatchResponseFromRaw(raw, after))
}

// patchJSON is the JSON patch of resp, as the webhook server would send it.
func patchJSON(resp admission.Response) ([]byte, error) {
	if len(resp.Patches) == 0 {
		return nil, nil
	}
	return json.Marshal(resp.Patches)
}

// checkSamePod fails b unless the fast path's patch and the typed one make
// the same pod of raw.
func checkSamePod(b *testing.B, raw, fastPatch []byte, l *sidecarcontrol.Lister, patcher typedPatcher) {
	b.Helper()
	typedPatch, err := patcher(l, "prod", raw)
	if err != nil {
		b.Fatal(err)
	}
	fast, typed := applyPatch(b, raw, fastPatch), applyPatch(b, raw, typedPatch)
	if !apiequality.Semantic.DeepEqual(fast, typed) {
		b.Fatalf("the fast path and the typed path make different pods:\n%+v\n%+v", fast, typed)
	}
	if len(fast.Spec.Containers) != 11 {
		b.Fatalf("the sidecar was not injected: %d containers", len(fast.Spec.Containers))
	}
}

func applyPatch(b *testing.B, raw, patch []byte) *corev1.Pod {
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		b.Fatal(err)
	}
	out, err := p.Apply(raw)
	if err != nil {
		b.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(out, pod); err != nil {
		b.Fatal(err)
	}
	return pod
}
