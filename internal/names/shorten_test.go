package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// The rules below are those of the names Deckhand has already given objects
// in clusters: each must keep producing exactly what its own function did
// before it used Rule, or existing objects would be renamed. The functions
// here are those functions as they were, kept as the reference.

// sidecarSetLabelValue is sidecarcontrol.NameLabelValue as it was.
func sidecarSetLabelValue(name string) string {
	if len(name) <= 63 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:46] + "-" + hex.EncodeToString(sum[:8])
}

// policyName is sidecarpolicy.Name as it was.
func policyName(name string) string {
	n := "deckhand-sidecarset-" + name
	if len(n) <= 253 {
		return n
	}
	sum := sha256.Sum256([]byte(name))
	return n[:253-17] + "-" + hex.EncodeToString(sum[:8])
}

// restartScheduleName is the restartschedule controller's generatedName as
// it was.
func restartScheduleName(name, kind string) string {
	full := name + "-" + strings.ToLower(kind)
	if len(full) <= 253 {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	hash := hex.EncodeToString(sum[:])[:8]
	cut := strings.TrimRight(full[:253-len(hash)-1], ".-")
	return cut + "-" + hash
}

func TestShortenKeepsExistingNames(t *testing.T) {
	var inputs []string
	for _, n := range []int{1, 45, 46, 47, 62, 63, 64, 65, 100, 226, 232, 233, 234, 235, 236, 237, 243, 244, 245, 246, 252, 253, 254, 300} {
		inputs = append(inputs, strings.Repeat("a", n))
		// Dots and dashes where a cut may end.
		inputs = append(inputs, strings.Repeat("a.b-", n/4+1)[:n])
		inputs = append(inputs, strings.Repeat("x", max(n-3, 0))+"-.-")
	}
	for _, name := range inputs {
		if got, want := (Rule{Max: 63, Digits: 16}).Shorten(name, name), sidecarSetLabelValue(name); got != want {
			t.Errorf("SidecarSet label value of %q (%d) = %q, was %q", name, len(name), got, want)
		}
		if got, want := (Rule{Max: 253, Digits: 16}).Shorten("deckhand-sidecarset-"+name, name), policyName(name); got != want {
			t.Errorf("policy name of %q (%d) = %q, was %q", name, len(name), got, want)
		}
		for _, kind := range []string{"Deployment", "StatefulSet"} {
			full := name + "-" + strings.ToLower(kind)
			if got, want := (Rule{Max: 253, Digits: 8, Trim: ".-"}).Shorten(full, full), restartScheduleName(name, kind); got != want {
				t.Errorf("RestartSchedule name of %q %s (%d) = %q, was %q", name, kind, len(name), got, want)
			}
		}
	}
}

func TestShorten(t *testing.T) {
	long := strings.Repeat("a", 70)
	cases := map[string]struct {
		rule      Rule
		name, key string
		want      string
	}{
		"fits":                    {Rule{Max: 63, Digits: 8}, "web", "web", "web"},
		"cut with a hash":         {Rule{Max: 20, Digits: 8}, long, long, strings.Repeat("a", 11) + "-" + "6bd5e503"},
		"trailing dashes trimmed": {Rule{Max: 20, Digits: 8, Trim: "-"}, "aaaaaaaaa--" + long, "k", "aaaaaaaaa-" + "8254c329"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := tc.rule.Shorten(tc.name, tc.key)
			if len(got) > tc.rule.Max {
				t.Errorf("Shorten = %q, %d bytes, more than %d", got, len(got), tc.rule.Max)
			}
			if got != tc.want {
				t.Errorf("Shorten = %q, want %q", got, tc.want)
			}
		})
	}
}
