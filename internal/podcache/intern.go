package podcache

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NOTE: the cache's pods are read-only (a controller copies a pod before it
// changes it, and the lists that skip the copy promise not to write), so
// pods may share what they hold alike. Sharing is what makes a cached pod
// cheap: the pods of one template carry the same labels, owner, containers,
// requests and limits, and (once running) the same container statuses.
// Each value is shared under a key that spells out every field the trimmed
// value keeps, so two pods share a value only when they would hold equal
// ones (TestSharedEqualsOwn).

// maxShared bounds each table. A cluster has about as many distinct values
// of a kind as it has pod templates; a table that fills up (a vertical
// autoscaler giving every pod its own figures, labels unique per pod)
// starts over empty, so it never holds more than maxShared values and
// values no pod holds any longer leave it. Pods keep what they were given.
const maxShared = 4096

// maxKeyBytes bounds a key: a value whose key is longer (a pod's own large
// annotations) is left to its pod, so that a table's keys never hold more
// than maxShared KiB.
const maxKeyBytes = 1024

// table interns values of one kind by their key.
type table[V any] struct {
	mu     sync.Mutex
	values map[string]V
	max    int
}

func newTable[V any](max int) *table[V] {
	return &table[V]{values: map[string]V{}, max: max}
}

// get returns the value interned under key, building and interning it
// first if there is none.
func (t *table[V]) get(key string, build func() V) V {
	if len(key) > maxKeyBytes {
		return build()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.values[key]; ok {
		return v
	}
	if len(t.values) >= t.max {
		clear(t.values)
	}
	v := build()
	t.values[key] = v
	return v
}

var (
	// A ResourceList is a map of its own per container, about 700 bytes even
	// with one entry: it was a third of a cached pod's memory with three
	// containers that ask for CPU (docs/benchmark-analysis.md, item 8).
	resourceLists = newTable[corev1.ResourceList](maxShared)
	// A trimmed Container is 440 bytes and a ContainerStatus 280 even with
	// most fields empty: with three containers, two fifths of a cached pod.
	containerLists = newTable[[]corev1.Container](maxShared)
	statusLists    = newTable[[]corev1.ContainerStatus](maxShared)
	ownerLists     = newTable[[]metav1.OwnerReference](maxShared)
	// Labels and annotations maps are about 400 bytes each with a few
	// entries.
	stringMaps = newTable[map[string]string](maxShared)
)

// key builds a table key. Each field is written with its length first:
// annotation values may hold any byte, and a terminator byte inside one
// would let two different maps spell the same key.
type key struct{ strings.Builder }

func (k *key) str(s string) {
	k.WriteString(strconv.Itoa(len(s)))
	k.WriteByte(':')
	k.WriteString(s)
}

func (k *key) int(i int64) { k.str(strconv.FormatInt(i, 10)) }

func (k *key) bool(b bool) { k.str(strconv.FormatBool(b)) }

func (k *key) boolPtr(b *bool) {
	if b == nil {
		k.str("nil")
		return
	}
	k.bool(*b)
}

// cpuMemoryKeys are the resources kept, in the order of a list's key.
var cpuMemoryKeys = [...]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// cpuMemory returns in's CPU and memory entries (nil when it has neither),
// as a list shared with every other pod whose entries are equal.
func cpuMemory(in corev1.ResourceList) corev1.ResourceList {
	var k key
	if !writeCPUMemory(&k, in) {
		return nil
	}
	return resourceLists.get(k.String(), func() corev1.ResourceList { return ownCPUMemory(in) })
}

// writeCPUMemory writes in's CPU and memory entries in canonical form
// ("1" and "1000m" are one list) and an end mark (a byte no field starts
// with), and reports whether in has either.
func writeCPUMemory(k *key, in corev1.ResourceList) bool {
	found := false
	for _, name := range cpuMemoryKeys {
		if q, ok := in[name]; ok {
			k.str(string(name))
			k.str(q.String())
			found = true
		}
	}
	k.WriteByte(1)
	return found
}

func ownCPUMemory(in corev1.ResourceList) corev1.ResourceList {
	var l corev1.ResourceList
	for _, name := range cpuMemoryKeys {
		if q, ok := in[name]; ok {
			if l == nil {
				l = make(corev1.ResourceList, 2)
			}
			l[name] = q
		}
	}
	return l
}

// internString returns s sharing its bytes with every equal string
// interned (image names and image IDs); the table lets go of a string once
// no pod holds it.
func internString(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// sharedStringMap returns m, or an equal map another pod already holds.
func sharedStringMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var k key
	for _, name := range keys {
		k.str(name)
		k.str(m[name])
	}
	return stringMaps.get(k.String(), func() map[string]string { return m })
}

func sharedOwners(in []metav1.OwnerReference) []metav1.OwnerReference {
	return sharedSlice(ownerLists, in, writeOwnerKey, slices.Clip[[]metav1.OwnerReference])
}

func writeOwnerKey(k *key, o *metav1.OwnerReference) {
	k.str(o.APIVersion)
	k.str(o.Kind)
	k.str(o.Name)
	k.str(string(o.UID))
	k.boolPtr(o.Controller)
	k.boolPtr(o.BlockOwnerDeletion)
}

// sharedSlice returns own(in), or an equal slice another pod already holds:
// the key is every element's writeKey in turn.
func sharedSlice[E, V any](t *table[[]V], in []E, writeKey func(*key, *E), own func([]E) []V) []V {
	if len(in) == 0 {
		return nil
	}
	var k key
	for i := range in {
		writeKey(&k, &in[i])
	}
	return t.get(k.String(), func() []V { return own(in) })
}
