package podjson

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestSharedMountJSON(t *testing.T) {
	cases := []struct {
		name, raw string
		writable  bool
		want      string // as JSON, compared decoded
		expr      string
	}{
		{name: "readOnly added", raw: `{"name":"data","mountPath":"/data"}`, want: `{"name":"data","mountPath":"/data","readOnly":true}`},
		{name: "readOnly false turned true", raw: `{"name":"data","readOnly":false,"mountPath":"/data"}`, want: `{"name":"data","mountPath":"/data","readOnly":true}`},
		{name: "readOnly true kept", raw: `{"readOnly":true,"name":"data","mountPath":"/data"}`, want: `{"name":"data","mountPath":"/data","readOnly":true}`},
		{name: "writable left alone", raw: `{"name":"data","readOnly":false,"mountPath":"/data"}`, writable: true, want: `{"name":"data","mountPath":"/data","readOnly":false}`},
		{name: "empty object", raw: ` { } `, want: `{"readOnly":true}`},
		{name: "whitespace and escapes", raw: "{ \"name\" : \"a\\\"b\" ,\n \"subPathExpr\": \"$(POD_NAME)/x\" }", want: `{"name":"a\"b","subPathExpr":"$(POD_NAME)/x","readOnly":true}`, expr: "$(POD_NAME)/x"},
		{name: "nested value", raw: `{"name":"data","mountPath":"/data","recursiveReadOnly":"Disabled","x":{"readOnly":false}}`, want: `{"name":"data","mountPath":"/data","recursiveReadOnly":"Disabled","x":{"readOnly":false},"readOnly":true}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, expr, err := sharedMountJSON([]byte(c.raw), c.writable)
			if err != nil {
				t.Fatalf("sharedMountJSON(%s): %v", c.raw, err)
			}
			var got, want any
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("the result %s is not JSON: %v", out, err)
			}
			if err := json.Unmarshal([]byte(c.want), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("sharedMountJSON(%s) = %s, want %s", c.raw, out, c.want)
			}
			if expr != c.expr {
				t.Errorf("subPathExpr %q, want %q", expr, c.expr)
			}
		})
	}
	for _, bad := range []string{``, `[]`, `{"name":}`, `{"name":"a"`, `null`} {
		if _, _, err := sharedMountJSON([]byte(bad), false); err == nil {
			t.Errorf("sharedMountJSON(%q) accepted malformed input", bad)
		}
	}
}
