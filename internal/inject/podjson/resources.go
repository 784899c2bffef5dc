package podjson

import (
	"encoding/json"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/deckhand-dev/deckhand/internal/sidecarcontrol"
)

// cpuMemoryIndex is a resource name's index in CPUMemory, -1 for others.
func cpuMemoryIndex(name []byte) int {
	switch string(name) {
	case string(corev1.ResourceCPU):
		return 0
	case string(corev1.ResourceMemory):
		return 1
	}
	return -1
}

// ContainerCPUMemory reads the CPU and memory requests and limits of the
// pod's container i (of spec.containers). Only a sidecar with a
// resourcesPolicy needs them, so the scanner keeps them raw and they are
// read here, on demand, with the same scanner (a reflective decode would
// cost more than the rest of the admission).
func (p *RawPod) ContainerCPUMemory(i int) (sidecarcontrol.CPUMemory, error) {
	var r sidecarcontrol.CPUMemory
	raw := p.Containers[i].resources
	if len(raw) == 0 {
		return r, nil
	}
	s := &scanner{b: raw}
	for key := range s.members() {
		switch string(key) {
		case "limits":
			s.quantities(&r.Limits, &r.HasLimit)
		case "requests":
			s.quantities(&r.Requests, &r.HasRequest)
		default:
			s.skip()
		}
	}
	return r, s.err
}

// quantities reads a resource list's CPU and memory into values. A
// quantity is a JSON string, or a bare number (which resource.Quantity
// also accepts).
func (s *scanner) quantities(values *[2]float64, has *[2]bool) {
	for key := range s.members() {
		k := cpuMemoryIndex(key)
		if k < 0 {
			s.skip()
			continue
		}
		var v string
		if s.peek() == '"' {
			v = s.string()
		} else {
			v = string(s.raw())
		}
		q, err := resource.ParseQuantity(v)
		if err != nil {
			s.fail()
			return
		}
		values[k], has[k] = q.AsApproximateFloat64(), true
	}
}

// EncodeResources encodes computed resources for Sidecar.Resources.
func EncodeResources(r *corev1.ResourceRequirements) []byte {
	// By hand: encoding/json's map and Quantity encoders were a fifth of
	// an admission with a resourcesPolicy. The keys in the order
	// encoding/json sorts them, so the bytes are the same.
	b := make([]byte, 0, 96)
	b = append(b, '{')
	for _, l := range [...]struct {
		key  string
		list corev1.ResourceList
	}{{"limits", r.Limits}, {"requests", r.Requests}} {
		if len(l.list) == 0 {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, l.key...)
		b = append(b, `":`...)
		b = appendResourceList(b, l.list)
	}
	return append(b, '}')
}

// appendResourceList appends l as a JSON object, its keys sorted.
func appendResourceList(b []byte, l corev1.ResourceList) []byte {
	names := make([]string, 0, len(l))
	for k := range l {
		names = append(names, string(k))
	}
	slices.Sort(names)
	b = append(b, '{')
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		q := l[corev1.ResourceName(k)]
		b = strconv.AppendQuote(b, k)
		b = append(b, ':')
		b = strconv.AppendQuote(b, q.String())
	}
	return append(b, '}')
}

// withoutMember returns the JSON object obj without its member key; obj was
// encoded by encoding/json (once per generation, never per pod).
func withoutMember(obj []byte, key string) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(obj, &m); err != nil {
		panic(err) // encoded just now
	}
	delete(m, key)
	return mustJSON(m)
}
