package podcache

import (
	"reflect"
	"strings"
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
	a := cpuMemory(list("cpu", "1", "memory", "1Gi"))
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
			got := cpuMemory(tc.in)
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
	if got := cpuMemory(list("ephemeral-storage", "1Gi")); got != nil {
		t.Fatalf("a list without CPU and memory = %v, want nil", got)
	}
}

// TestTableStartsOverWhenFull: a table never holds more than its bound,
// and values interned before it started over stay as they were.
func TestTableStartsOverWhenFull(t *testing.T) {
	table := newTable[corev1.ResourceList](2)
	get := func(key, cpu string) corev1.ResourceList {
		k := newKey()
		k.str(key)
		return table.get(k, func() corev1.ResourceList { return list("cpu", cpu) })
	}
	first := get("a", "1")
	if !sameMap(first, get("a", "1")) {
		t.Fatal("the first value is not shared")
	}
	get("b", "2")
	get("c", "3")
	if len(table.values) != 1 {
		t.Fatalf("a full table holds %d values, want 1 after starting over", len(table.values))
	}
	if sameMap(first, get("a", "1")) {
		t.Fatal("a value from before the table started over is still interned")
	}
	if q := first[corev1.ResourceCPU]; q.Cmp(resource.MustParse("1")) != 0 {
		t.Fatalf("cpu = %v", q.String())
	}
}

// TestTableLeavesLongKeysOut: a value with a long key is built for its pod
// and not held by the table.
func TestTableLeavesLongKeysOut(t *testing.T) {
	table := newTable[corev1.ResourceList](2)
	long := strings.Repeat("x", maxKeyBytes+1)
	get := func() corev1.ResourceList {
		k := newKey()
		k.str(long)
		return table.get(k, func() corev1.ResourceList { return list("cpu", "1") })
	}
	a, b := get(), get()
	if sameMap(a, b) || len(table.values) != 0 {
		t.Fatalf("a value with a %d-byte key was interned", len(long))
	}
}

func TestInternStringShares(t *testing.T) {
	a := internString(string([]byte("registry.example.com/app:v1")))
	b := internString(string([]byte("registry.example.com/app:v1")))
	if unsafe.StringData(a) != unsafe.StringData(b) {
		t.Fatal("equal images do not share their bytes")
	}
}
