package podjson

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestEncodeResourcesIsEncodingJSON: the hand-written encoder writes the
// bytes encoding/json writes.
func TestEncodeResourcesIsEncodingJSON(t *testing.T) {
	q := resource.MustParse
	cases := []corev1.ResourceRequirements{
		{},
		{Limits: corev1.ResourceList{corev1.ResourceCPU: q("1500m")}},
		{Requests: corev1.ResourceList{corev1.ResourceMemory: q("512Mi"), corev1.ResourceCPU: q("150m")}},
		{Limits: corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("1073741825")},
			Requests: corev1.ResourceList{corev1.ResourceCPU: q("667m"), corev1.ResourceMemory: q("64Mi")}},
		{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{corev1.ResourceCPU: q("1")}},
	}
	for _, r := range cases {
		want, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		if got := EncodeResources(&r); string(got) != string(want) {
			t.Errorf("EncodeResources = %s, want %s", got, want)
		}
	}
}
