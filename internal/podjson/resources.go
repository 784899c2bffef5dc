package podjson

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// ContainerResources reads the CPU and memory requests and limits of the
// pod's container i (of spec.containers); other resources are left out.
// Only a sidecar with a resourcesPolicy needs them, so the scanner keeps
// them raw and they are read here, on demand, with the same scanner (a
// reflective decode would cost more than the rest of the admission).
func (p *RawPod) ContainerResources(i int) (corev1.ResourceRequirements, error) {
	var r corev1.ResourceRequirements
	raw := p.Containers[i].resources
	if len(raw) == 0 {
		return r, nil
	}
	s := &scanner{b: raw}
	if !s.begin('{') {
		return r, s.err
	}
	for first := true; s.more(&first, '}'); {
		switch string(s.key()) {
		case "limits":
			r.Limits = s.quantities()
		case "requests":
			r.Requests = s.quantities()
		default:
			s.skip()
		}
	}
	return r, s.err
}

// quantities reads a resource list, keeping cpu and memory. A quantity is
// a JSON string, or a bare number (which resource.Quantity also accepts).
func (s *scanner) quantities() corev1.ResourceList {
	var out corev1.ResourceList
	if !s.begin('{') {
		return nil
	}
	for first := true; s.more(&first, '}'); {
		k := string(s.key())
		if k != string(corev1.ResourceCPU) && k != string(corev1.ResourceMemory) {
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
			return nil
		}
		if out == nil {
			out = make(corev1.ResourceList, 2)
		}
		out[corev1.ResourceName(k)] = q
	}
	return out
}

// EncodeResources encodes computed resources for Sidecar.Resources.
func EncodeResources(r *corev1.ResourceRequirements) []byte { return mustJSON(r) }

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
