package sidecarpolicy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // API types always encode
	}
	return b
}

// listLit is the CEL literal of v's JSON (a list), "[]" when empty.
func listLit(v any) string {
	if l := lit(mustJSON(v)); l != "null" {
		return l
	}
	return "[]"
}

// lit returns the CEL literal of a JSON value (raw JSON or decoded with
// UseNumber). Every element is wrapped in dyn(): the API server's CEL
// environment requires aggregate literals to be homogeneous.
func lit(v any) string {
	if raw, ok := v.([]byte); ok {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var x any
		if err := dec.Decode(&x); err != nil {
			panic(err)
		}
		v = x
	}
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	case string:
		return q(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return strconv.FormatInt(i, 10)
		}
		return x.String()
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = "dyn(" + lit(e) + ")"
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		fields := make(map[string]string, len(x))
		for k, e := range x {
			fields[k] = lit(e)
		}
		return mapLit(fields)
	}
	panic(fmt.Sprintf("unexpected JSON value %T", v))
}

// mapLit is a CEL map literal of already-rendered values, keys sorted.
func mapLit(fields map[string]string) string {
	keys := slices.Sorted(maps.Keys(fields))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = q(k) + ": dyn(" + fields[k] + ")"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// q is a CEL string literal.
func q(s string) string { return strconv.Quote(s) }

func strList(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = q(n)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func quotedJoin(names []string) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = `"` + n + `"`
	}
	return strings.Join(parts, ",")
}
