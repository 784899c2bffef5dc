package sidecarpolicy

import "testing"

// The CEL literals of JSON values: a map's keys come sorted, so one
// SidecarSet always compiles to the same policy text and the controller
// does not rewrite an unchanged policy.
func TestLit(t *testing.T) {
	cases := map[string]struct {
		json string
		want string
	}{
		"scalars":         {json: `[null, true, "a\"b", 7, 1.5]`, want: `[dyn(null), dyn(true), dyn("a\"b"), dyn(7), dyn(1.5)]`},
		"map keys sorted": {json: `{"zone": "a", "app": {"tier": 1, "name": "web"}, "mode": []}`, want: `{"app": dyn({"name": dyn("web"), "tier": dyn(1)}), "mode": dyn([]), "zone": dyn("a")}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := lit([]byte(tc.json)); got != tc.want {
				t.Errorf("lit(%s) = %s, want %s", tc.json, got, tc.want)
			}
		})
	}
}
