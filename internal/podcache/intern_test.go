package podcache

import (
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func sameMap(a, b corev1.ResourceList) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// TestCPUMemoryInterns: equal CPU and memory entries give one shared list,
// whatever else the lists hold and however the quantities are written;
// different ones do not.
func TestCPUMemoryInterns(t *testing.T) {
	table := newListTable(10)
	a := table.cpuMemory(list("cpu", "1", "memory", "1Gi"))
	cases := []struct {
		name  string
		in    corev1.ResourceList
		share bool
	}{
		{"equal", list("cpu", "1", "memory", "1Gi"), true},
		{"equal in another form", list("cpu", "1000m", "memory", "1Gi"), true},
		{"with other resources", list("cpu", "1", "memory", "1Gi", "ephemeral-storage", "1Gi"), true},
		{"other cpu", list("cpu", "2", "memory", "1Gi"), false},
		{"cpu only", list("cpu", "1"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := table.cpuMemory(tc.in)
			if sameMap(got, a) != tc.share {
				t.Fatalf("shared = %v, want %v", !tc.share, tc.share)
			}
			for _, k := range cpuMemoryKeys {
				q, ok := tc.in[k]
				g, gok := got[k]
				if ok != gok || (ok && q.Cmp(g) != 0) {
					t.Fatalf("%s = %v, want %v", k, got, tc.in)
				}
			}
			if _, ok := got[corev1.ResourceEphemeralStorage]; ok {
				t.Fatalf("kept ephemeral-storage: %v", got)
			}
		})
	}
	if got := table.cpuMemory(list("ephemeral-storage", "1Gi")); got != nil {
		t.Fatalf("a list without CPU and memory = %v, want nil", got)
	}
}

// TestCPUMemoryStopsInterningWhenFull: past the bound a list is a pod's
// own, so the table cannot grow without limit.
func TestCPUMemoryStopsInterningWhenFull(t *testing.T) {
	table := newListTable(1)
	first := table.cpuMemory(list("cpu", "1"))
	if !sameMap(first, table.cpuMemory(list("cpu", "1"))) {
		t.Fatal("the first list is not shared")
	}
	x, y := table.cpuMemory(list("cpu", "2")), table.cpuMemory(list("cpu", "2"))
	if sameMap(x, y) || len(table.lists) != 1 {
		t.Fatalf("a full table interned another list (%d entries)", len(table.lists))
	}
	if q := y[corev1.ResourceCPU]; q.Cmp(resource.MustParse("2")) != 0 {
		t.Fatalf("cpu = %v", q.String())
	}
}

func TestInternStringShares(t *testing.T) {
	a := internString(string([]byte("registry.example.com/app:v1")))
	b := internString(string([]byte("registry.example.com/app:v1")))
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("equal images do not share their bytes")
	}
}
