package podcache

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// memoryRange is the memory a value occupies.
type memoryRange struct {
	path       string
	start, end uintptr
}

// memoryOf lists the memory v refers to: its strings' bytes, slices'
// arrays, pointers' targets and maps, recursively.
func memoryOf(path string, v reflect.Value, seen map[uintptr]bool, out *[]memoryRange) {
	add := func(p uintptr, size uintptr) {
		if size == 0 {
			size = 1
		}
		*out = append(*out, memoryRange{path, p, p + size})
	}
	switch v.Type() {
	case reflect.TypeFor[resource.Format](), reflect.TypeFor[*time.Location]():
		return // the packages' own variables, not memory of the pod
	}
	switch v.Kind() {
	case reflect.String:
		// The runtime points one-byte strings at a static table.
		if s := v.String(); len(s) > 1 {
			add(uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(len(s)))
		}
	case reflect.Slice:
		if v.Cap() == 0 {
			return
		}
		add(v.Pointer(), uintptr(v.Cap())*v.Type().Elem().Size())
		for i := range v.Len() {
			memoryOf(fmt.Sprintf("%s[%d]", path, i), v.Index(i), seen, out)
		}
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		add(v.Pointer(), v.Type().Elem().Size())
		memoryOf(path, v.Elem(), seen, out)
	case reflect.Map:
		if v.IsNil() {
			return
		}
		add(v.Pointer(), 1)
		for it := v.MapRange(); it.Next(); {
			memoryOf(path+"."+fmt.Sprint(it.Key()), it.Key(), seen, out)
			memoryOf(path+"["+fmt.Sprint(it.Key())+"]", it.Value(), seen, out)
		}
	case reflect.Interface:
		if !v.IsNil() {
			memoryOf(path, v.Elem(), seen, out)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			memoryOf(path+"."+v.Type().Field(i).Name, v.Field(i), seen, out)
		}
	}
}

func memoryOfValue(v any) []memoryRange {
	var out []memoryRange
	memoryOf("", reflect.ValueOf(v), map[uintptr]bool{}, &out)
	return out
}

// clearTables empties the intern tables, so that what a trim shares is
// built from the pod at hand.
func clearTables() {
	for _, t := range []interface{ reset() }{resourceLists, containerLists, statusLists, ownerLists, stringMaps} {
		t.reset()
	}
}

// TestTrimHoldsNothingOfTheDecodedPod: no string, slice, map or pointer of
// a trimmed pod refers to memory of the pod it was trimmed from, so the
// decoded pod's memory is free once the informer lets go of it.
func TestTrimHoldsNothingOfTheDecodedPod(t *testing.T) {
	in := fullPod()
	in.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	in.Spec.InitContainers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	in.Status.ContainerStatuses[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	in.OwnerReferences[0].BlockOwnerDeletion = ptr.To(true)
	data, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		tables func()
	}{
		{"values built from this pod", clearTables},
		{"values shared with an earlier pod", func() {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.tables()
			// As the informer gets it: decoded from the API server's
			// protobuf, every string an allocation of its own.
			decoded := &corev1.Pod{}
			if err := decoded.Unmarshal(data); err != nil {
				t.Fatal(err)
			}
			out, err := Trim(decoded)
			if err != nil {
				t.Fatal(err)
			}
			held := memoryOfValue(decoded)
			for _, r := range memoryOfValue(out) {
				for _, h := range held {
					if r.start < h.end && h.start < r.end {
						t.Errorf("trimmed pod's %s refers to the decoded pod's %s", r.path, h.path)
					}
				}
			}
		})
	}
}

func (t *table[V]) reset() {
	t.mu.Lock()
	defer t.mu.Unlock()
	clear(t.values)
}

// BenchmarkTrimHeld is what the cache holds per pod after an initial list:
// 10,000 pods decoded from protobuf as the informer gets them, trimmed,
// kept in a map as the store keeps them, the decoded ones dropped. It
// reports the live heap and the heap spans in use per pod.
func BenchmarkTrimHeld(b *testing.B) {
	const n = 10000
	var list corev1.PodList
	for i := range n {
		p := fullPod()
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds, p.Finalizers = nil, nil, nil
		p.Name = fmt.Sprintf("web-%05d", i)
		p.UID = types.UID(fmt.Sprintf("%08d-1111-2222-3333-444455556666", i))
		p.ResourceVersion = fmt.Sprint(100000 + i)
		list.Items = append(list.Items, *p)
	}
	data, err := list.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	list = corev1.PodList{}
	var live, spans float64
	for b.Loop() {
		clearTables()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		store := decodeAndTrim(b, data)
		runtime.GC()
		runtime.ReadMemStats(&after)
		live += float64(after.HeapAlloc-before.HeapAlloc) / n
		spans += float64(after.HeapInuse-before.HeapInuse) / n
		runtime.KeepAlive(store)
	}
	b.ReportMetric(live/float64(b.N), "live-B/pod")
	b.ReportMetric(spans/float64(b.N), "spans-B/pod")
}

func decodeAndTrim(b *testing.B, data []byte) map[string]any {
	var decoded corev1.PodList
	if err := decoded.Unmarshal(data); err != nil {
		b.Fatal(err)
	}
	store := make(map[string]any, len(decoded.Items))
	for i := range decoded.Items {
		out, err := Trim(&decoded.Items[i])
		if err != nil {
			b.Fatal(err)
		}
		p := out.(*corev1.Pod)
		store[p.Namespace+"/"+p.Name] = out
	}
	return store
}
