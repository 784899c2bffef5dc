package podjson

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// ContainerResources decodes the resources of the pod's container i (of
// spec.containers). Only a sidecar with a resourcesPolicy needs them, so
// the scanner keeps them raw and they are decoded here, on demand.
func (p *RawPod) ContainerResources(i int) (corev1.ResourceRequirements, error) {
	var r corev1.ResourceRequirements
	raw := p.Containers[i].resources
	if len(raw) == 0 || string(raw) == "null" {
		return r, nil
	}
	err := json.Unmarshal(raw, &r)
	return r, err
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
