package inject

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
	"github.com/deckhand-dev/deckhand/internal/test/testutil"
)

// BenchmarkInjectWithFeatures is BenchmarkInject's large pod injected by a
// SidecarSet that uses patchPodMetadata (Retain, Overwrite and a JSON
// merge), transferEnv envNames from a container named by a label, and a
// resourcesPolicy: what those features cost per pod when they are used.
func BenchmarkInjectWithFeatures(b *testing.B) {
	s := set("features", func(s *deckhandv1alpha1.SidecarSet) {
		c := &s.Spec.Containers[0]
		c.TransferEnv = []deckhandv1alpha1.TransferEnvVar{{
			SourceContainerNameFrom: &deckhandv1alpha1.SourceContainerNameSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['main']"}},
			EnvNames:                []string{"LOG_LEVEL", "TZ"},
		}}
		c.ResourcesPolicy = &deckhandv1alpha1.ResourcesPolicy{ResourceExpr: deckhandv1alpha1.ResourceExpr{
			Limits:   &deckhandv1alpha1.ResourceExprPair{CPU: "cpu * 0.5", Memory: "max(memory * 0.25, quantity('128Mi'))"},
			Requests: &deckhandv1alpha1.ResourceExprPair{CPU: "max(cpu * 0.1, quantity('50m'))", Memory: "memory * 0.25"},
		}}
		s.Spec.PatchPodMetadata = []deckhandv1alpha1.SidecarSetPatchPodMetadata{
			{Annotations: map[string]string{"example.com/owner": "platform"}},
			{PatchPolicy: deckhandv1alpha1.SidecarSetOverwritePatchPolicy, Annotations: map[string]string{"example.com/log-format": "json"}},
			{PatchPolicy: deckhandv1alpha1.SidecarSetMergePatchJSONPatchPolicy, Annotations: map[string]string{"example.com/scrape": `{"port":9090}`}},
		}
	})
	allow, _ := sidecarcontrol.ParseMetadataAllowlist([]string{"example.com/*"})
	l := testListerWith(b, sidecarcontrol.Options{PodMetadata: sidecarcontrol.PodMetadataAllowlists{Annotations: allow}},
		map[string]map[string]string{"prod": {"env": "prod"}}, s)
	pod := testutil.LargePod()
	pod.Labels["main"] = pod.Spec.Containers[0].Name
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations["example.com/scrape"] = `{"path":"/metrics"}`
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Resources = corev1.ResourceRequirements{
			Limits:   corev1.ResourceList{corev1.ResourceCPU: mustQ("1"), corev1.ResourceMemory: mustQ("1Gi")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: mustQ("500m"), corev1.ResourceMemory: mustQ("512Mi")},
		}
	}
	req := podRequest(b, "prod", pod)
	h := &Handler{Lister: l}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if resp := h.Handle(ctx, req); len(resp.Patch) == 0 {
			b.Fatal("nothing injected")
		}
	}
}

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }
