package podset

import (
	"encoding/json"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
)

// Revision returns the revision of a pod template: a short, stable hash of
// its JSON form (encoding/json sorts map keys, so equal templates hash
// equally). It is stored in the PodSetRevisionLabel of every pod.
func Revision(t *corev1.PodTemplateSpec) string {
	return hashJSON(t)
}

// InPlaceHash returns the hash of a template with every container image left
// out. Two templates with the same InPlaceHash differ at most in the images
// of their (regular) containers, so a pod can move from one to the other by
// an in-place image patch. Init container images are included: the kubelet
// does not rerun init containers of a running pod.
func InPlaceHash(t *corev1.PodTemplateSpec) string {
	c := t.DeepCopy()
	for i := range c.Spec.Containers {
		c.Spec.Containers[i].Image = ""
	}
	return hashJSON(c)
}

func hashJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// A PodTemplateSpec always marshals; keep the function total anyway.
		b = []byte(err.Error())
	}
	h := fnv.New32a()
	_, _ = h.Write(b)
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}
