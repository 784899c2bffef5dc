package sidecarcontrol

import (
	"bytes"
	"encoding/json"
)

// MergeJSONObject merges patch, a JSON object, into orig, a JSON object, as
// an RFC 7386 JSON merge patch: members of patch replace orig's, a null
// member removes orig's, objects merge recursively. The result is compact
// JSON with object members sorted by key. ok is false when either is not a
// JSON object; the caller then keeps orig. Numbers are kept as written.
func MergeJSONObject(orig, patch string) (merged string, ok bool) {
	o, okO := decodeObject(orig)
	p, okP := decodeObject(patch)
	if !okO || !okP {
		return "", false
	}
	out, err := json.Marshal(mergeObject(o, p))
	if err != nil {
		return "", false
	}
	return string(out), true
}

func decodeObject(s string) (map[string]any, bool) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return nil, false
	}
	return m, true
}

func mergeObject(target, patch map[string]any) map[string]any {
	for k, v := range patch {
		if v == nil {
			delete(target, k)
			continue
		}
		if pv, isObj := v.(map[string]any); isObj {
			tv, _ := target[k].(map[string]any)
			if tv == nil {
				tv = map[string]any{}
			}
			target[k] = mergeObject(tv, pv)
			continue
		}
		target[k] = v
	}
	return target
}
