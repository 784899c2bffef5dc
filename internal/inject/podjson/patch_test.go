package podjson

import "testing"

// TestWritePatchLabels: labels are added one by one into a pod's labels,
// and as a new map into a pod that has none, with keys escaped as JSON
// pointer tokens.
func TestWritePatchLabels(t *testing.T) {
	add := &Additions{Labels: []Annotation{{Key: "example.com/tier", Value: "edge"}}}
	for _, tc := range []struct{ pod, want string }{
		{`{"metadata":{"labels":{"app":"web"}},"spec":{}}`, `[{"op":"add","path":"/metadata/labels/example.com~1tier","value":"edge"}]`},
		{`{"metadata":{"name":"p"},"spec":{}}`, `[{"op":"add","path":"/metadata/labels","value":{"example.com/tier":"edge"}}]`},
	} {
		var p RawPod
		if err := DecodePod([]byte(tc.pod), &p); err != nil {
			t.Fatal(err)
		}
		got, err := WritePatch(&p, add)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("pod %s: patch %s, want %s", tc.pod, got, tc.want)
		}
	}
}
