package restartschedule

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestUnitGeneratedName(t *testing.T) {
	long := strings.Repeat("a", 253)
	cases := map[string]struct {
		name, kind string
		want       string // "" checks only the shape of a shortened name
	}{
		"Deployment":          {name: "web", kind: "Deployment", want: "web-deployment"},
		"StatefulSet":         {name: "web", kind: "StatefulSet", want: "web-statefulset"},
		"DaemonSet":           {name: "agent", kind: "DaemonSet", want: "agent-daemonset"},
		"dotted name":         {name: "web.v2", kind: "Deployment", want: "web.v2-deployment"},
		"exactly 253":         {name: strings.Repeat("a", 253-len("-deployment")), kind: "Deployment", want: strings.Repeat("a", 253-len("-deployment")) + "-deployment"},
		"254 is shortened":    {name: strings.Repeat("a", 254-len("-deployment")), kind: "Deployment"},
		"longest Deployment":  {name: long, kind: "Deployment"},
		"longest StatefulSet": {name: long, kind: "StatefulSet"},
		// A cut that would end in "." or "-" would make an invalid name
		// once the hash is appended.
		"cut at a dot":  {name: strings.Repeat("a", 243) + ".b" + strings.Repeat("c", 8), kind: "Deployment"},
		"cut at a dash": {name: strings.Repeat("a", 243) + "-b" + strings.Repeat("c", 8), kind: "Deployment"},
	}
	seen := map[string]string{}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := generatedName(tc.name, tc.kind)
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Fatalf("%q is not a valid name: %v", got, errs)
			}
			if got != generatedName(tc.name, tc.kind) {
				t.Fatalf("not stable")
			}
			if tc.want != "" && got != tc.want {
				t.Fatalf("generatedName(%q, %q) = %q, want %q", tc.name, tc.kind, got, tc.want)
			}
			if tc.want == "" && (len(got) > 253 || got[len(got)-9] != '-') {
				t.Fatalf("shortened name %q (%d characters) does not end with -<8 hex digits>", got, len(got))
			}
		})
		got := generatedName(tc.name, tc.kind)
		if other, dup := seen[got]; dup {
			t.Errorf("cases %q and %q both generate %q", name, other, got)
		}
		seen[got] = name
	}
}
