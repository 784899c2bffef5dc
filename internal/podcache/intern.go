package podcache

import (
	"slices"
	"strconv"
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
func (t *table[V]) get(k *key, build func() V) V {
	defer k.release()
	if len(k.b) > maxKeyBytes {
		return build()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if v, ok := t.values[string(k.b)]; ok {
		return v
	}
	if len(t.values) >= t.max {
		clear(t.values)
	}
	v := build()
	t.values[string(k.b)] = v
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
//
// NOTE: keys are built in pooled buffers and looked up without a copy:
// building each key afresh was most of a trim's allocations, and its
// garbage landed between the allocations a trimmed pod keeps (see fresh.go).
// BenchmarkTrim: 39 -> 14 allocations, 3,720 -> 2,368 B and 7.9 -> 4.3 µs
// per pod event (medians of three).
type key struct{ b []byte }

var keys = sync.Pool{New: func() any { return &key{b: make([]byte, 0, 256)} }}

func newKey() *key { return keys.Get().(*key) }

// release returns k to the pool; the caller no longer holds it.
func (k *key) release() {
	if cap(k.b) > 4*maxKeyBytes {
		return
	}
	k.b = k.b[:0]
	keys.Put(k)
}

// length starts a field of n bytes.
func (k *key) length(n int) {
	k.b = strconv.AppendInt(k.b, int64(n), 10)
	k.b = append(k.b, ':')
}

func (k *key) str(s string) {
	k.length(len(s))
	k.b = append(k.b, s...)
}

func (k *key) int(i int64) {
	var digits [20]byte
	n := strconv.AppendInt(digits[:0], i, 10)
	k.length(len(n))
	k.b = append(k.b, n...)
}

func (k *key) bool(b bool) { k.str(strconv.FormatBool(b)) }

func (k *key) end() { k.b = append(k.b, 1) }

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
	k := newKey()
	if !writeCPUMemory(k, in) {
		k.release()
		return nil
	}
	return resourceLists.get(k, func() corev1.ResourceList { return ownCPUMemory(in) })
}

// writeCPUMemory writes in's CPU and memory entries in canonical form
// ("1" and "1000m" are one list) and an end mark (a byte no field starts
// with), and reports whether in has either.
func writeCPUMemory(k *key, in corev1.ResourceList) bool {
	found := false
	for _, name := range cpuMemoryKeys {
		if q, ok := in[name]; ok {
			k.str(string(name))
			var buf [32]byte
			number, suffix := q.CanonicalizeBytes(buf[:0])
			k.length(len(number) + len(suffix))
			k.b = append(append(k.b, number...), suffix...)
			found = true
		}
	}
	k.end()
	return found
}

func ownCPUMemory(in corev1.ResourceList) corev1.ResourceList {
	var l corev1.ResourceList
	for _, name := range cpuMemoryKeys {
		if q, ok := in[name]; ok {
			if l == nil {
				l = make(corev1.ResourceList, 2)
			}
			l[name] = freshQuantity(q)
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

// sharedStringMap returns a copy of the entries of m that keep accepts (all
// of them when keep is nil), or an equal map another pod already holds.
func sharedStringMap(m map[string]string, keep func(k string) bool) map[string]string {
	var few [16]string
	names := few[:0]
	for k := range m {
		if keep == nil || keep(k) {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	k := newKey()
	for _, name := range names {
		k.str(name)
		k.str(m[name])
	}
	return stringMaps.get(k, func() map[string]string { return freshStringMap(m, names) })
}

func sharedOwners(in []metav1.OwnerReference) []metav1.OwnerReference {
	return sharedSlice(ownerLists, in, writeOwnerKey, freshOwners)
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
	k := newKey()
	for i := range in {
		writeKey(k, &in[i])
	}
	return t.get(k, func() []V { return own(in) })
}
