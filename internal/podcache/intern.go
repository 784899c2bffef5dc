package podcache

import (
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
)

// NOTE: the cache's pods are read-only (a controller copies a pod before it
// changes it, and the lists that skip the copy promise not to write), so
// pods may share what they hold alike. Sharing is what makes the values
// below cheap: the pods of one template carry the same requests and limits
// and run the same images.

// maxResourceLists bounds the interned resource lists. A cluster has about
// as many distinct lists as it has pod templates; past the bound (a
// vertical autoscaler giving every pod its own figures), a pod gets a list
// of its own, as without interning, so the table never holds more than
// about 3 MB.
const maxResourceLists = 4096

// resourceLists interns the trimmed CPU and memory lists. A ResourceList is
// a map of its own per container, about 700 bytes even with one entry: it
// was a third of a cached pod's memory with three containers that ask for
// CPU (docs/benchmark-analysis.md, item 8).
var resourceLists = newListTable(maxResourceLists)

type listTable struct {
	mu    sync.RWMutex
	lists map[string]corev1.ResourceList
	max   int
}

func newListTable(max int) *listTable {
	return &listTable{lists: map[string]corev1.ResourceList{}, max: max}
}

// cpuMemoryKeys are the resources kept, in the order of a list's key.
var cpuMemoryKeys = [...]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory}

// cpuMemory returns in's CPU and memory entries (nil when it has neither),
// as a list shared with every other pod whose entries are equal.
func cpuMemory(in corev1.ResourceList) corev1.ResourceList { return resourceLists.cpuMemory(in) }

func (t *listTable) cpuMemory(in corev1.ResourceList) corev1.ResourceList {
	var key strings.Builder
	for _, k := range cpuMemoryKeys {
		if q, ok := in[k]; ok {
			// The canonical form: "1" and "1000m" are one list.
			key.WriteString(string(k))
			key.WriteByte('=')
			key.WriteString(q.String())
			key.WriteByte(';')
		}
	}
	if key.Len() == 0 {
		return nil
	}
	return t.get(key.String(), in)
}

func (t *listTable) get(key string, in corev1.ResourceList) corev1.ResourceList {
	t.mu.RLock()
	l, ok := t.lists[key]
	full := len(t.lists) >= t.max
	t.mu.RUnlock()
	if ok {
		return l
	}
	l = make(corev1.ResourceList, 2)
	for _, k := range cpuMemoryKeys {
		if q, ok := in[k]; ok {
			l[k] = q
		}
	}
	if full {
		return l
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if have, ok := t.lists[key]; ok { // interned meanwhile
		return have
	}
	t.lists[key] = l
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
