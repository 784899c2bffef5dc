package podcache

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// NOTE: the decoder gives every string of a pod an allocation of its own,
// a few bytes each, side by side with the strings of every other field.
// The allocator hands out memory in spans of one size class, and a span
// stays in use while any object in it lives: a trimmed pod pointing at its
// decoded name, UID, resource version, node name and phase kept spans of
// the decoded pod's strings in use. So a trimmed pod holds nothing of the
// decoded one (TestTrimHoldsNothingOfTheDecodedPod): its own strings are
// copied into one allocation, the strings many pods hold alike are
// interned, and pointers are to copies. BenchmarkTrimHeld, 10,000 pods
// decoded from protobuf and trimmed: 2,130 -> 1,906 B of live heap and
// 2,630 -> 2,097 B of heap spans in use per pod.

// freshStrings3 returns copies of a, b and c that share one allocation.
func freshStrings3(a, b, c string) (string, string, string) {
	s := strings.Clone(a + b + c)
	return s[:len(a)], s[len(a) : len(a)+len(b)], s[len(a)+len(b):]
}

// freshPtr returns a pointer to a copy of *p, or nil.
func freshPtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// internStrings returns in's strings interned in a new slice.
func internStrings(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = internString(s)
	}
	return out
}

func internStatus(s corev1.ConditionStatus) corev1.ConditionStatus {
	switch s {
	case corev1.ConditionTrue:
		return corev1.ConditionTrue
	case corev1.ConditionFalse:
		return corev1.ConditionFalse
	case corev1.ConditionUnknown:
		return corev1.ConditionUnknown
	}
	return corev1.ConditionStatus(internString(string(s)))
}

func freshTypeMeta(t metav1.TypeMeta) metav1.TypeMeta {
	return metav1.TypeMeta{Kind: internString(t.Kind), APIVersion: internString(t.APIVersion)}
}

// freshStringMap copies the entries of m named in keys: keys interned
// (label and annotation keys repeat across workloads), values copied.
func freshStringMap(m map[string]string, keys []string) map[string]string {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		out[internString(k)] = strings.Clone(m[k])
	}
	return out
}

func freshOwners(in []metav1.OwnerReference) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, len(in))
	for i := range in {
		out[i] = metav1.OwnerReference{
			APIVersion: internString(in[i].APIVersion), Kind: internString(in[i].Kind), Name: internString(in[i].Name),
			UID: types.UID(strings.Clone(string(in[i].UID))), Controller: freshPtr(in[i].Controller), BlockOwnerDeletion: freshPtr(in[i].BlockOwnerDeletion),
		}
	}
	return out
}

// freshQuantity returns q parsed anew from its canonical form: a decoded
// quantity keeps the string it was decoded from.
func freshQuantity(q resource.Quantity) resource.Quantity {
	var buf [32]byte
	number, suffix := q.CanonicalizeBytes(buf[:0])
	fresh, err := resource.ParseQuantity(string(number) + string(suffix))
	if err != nil {
		return q.DeepCopy() // cannot happen: the canonical form parses
	}
	return fresh
}

var alwaysRestart = corev1.ContainerRestartPolicyAlways

// freshRestartPolicy returns a pointer to a policy equal to *p, or nil.
func freshRestartPolicy(p *corev1.ContainerRestartPolicy) *corev1.ContainerRestartPolicy {
	switch {
	case p == nil:
		return nil
	case *p == alwaysRestart:
		return &alwaysRestart // read-only, like all of a cached pod
	}
	policy := corev1.ContainerRestartPolicy(internString(string(*p)))
	return &policy
}
