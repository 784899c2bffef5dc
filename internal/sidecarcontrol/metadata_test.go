package sidecarcontrol

import "testing"

func TestMetadataAllowlist(t *testing.T) {
	a, err := ParseMetadataAllowlist([]string{" example.com/* ", "", "team.io/owner", "*.corp.io/*"})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{
		"example.com/x":                 true,
		"example.com/":                  true,
		"example.com":                   false,
		"sub.example.com/x":             false,
		"team.io/owner":                 true,
		"team.io/owners":                false,
		"a.corp.io/k":                   true,
		"apps.deckhand.dev/sidecarsets": false,
		"other":                         false,
	} {
		if got := a.Allows(key); got != want {
			t.Errorf("Allows(%q) = %v, want %v", key, got, want)
		}
	}
	if (MetadataAllowlist{}).Allows("example.com/x") {
		t.Error("the empty allowlist allows a key")
	}
	if star, _ := ParseMetadataAllowlist([]string{"*"}); star.Allows("apps.deckhand.dev/x") {
		t.Error("a wildcard allowlist allows Deckhand's own keys")
	}
	if _, err := ParseMetadataAllowlist([]string{"example.com/["}); err == nil {
		t.Error("a bad pattern was accepted")
	}
	every, _ := ParseMetadataAllowlist([]string{"*/*", "*.apps.deckhand.dev/*"})
	for _, k := range []string{"podset.apps.deckhand.dev/controller-uid", "version.sidecarset.apps.deckhand.dev/mesh-1", "apps.deckhand.dev/sidecarsets"} {
		if every.Allows(k) {
			t.Errorf("an allowlist matching every key allows Deckhand's own %q", k)
		}
	}
}

func TestIsReservedAnnotation(t *testing.T) {
	for key, want := range map[string]bool{
		"apps.deckhand.dev/sidecarsets":               true,
		"podset.apps.deckhand.dev/controller-uid":     true,
		"version.sidecarset.apps.deckhand.dev/mesh-1": true,
		"Apps.Deckhand.Dev/x":                         true,
		"apps.deckhand.dev":                           false, // no prefix: a name, not a domain
		"notapps.deckhand.dev/x":                      false,
		"apps.deckhand.dev.example.com/x":             false,
		"example.com/apps.deckhand.dev":               false,
		"deckhand.dev/x":                              false,
	} {
		if got := IsReservedAnnotation(key); got != want {
			t.Errorf("IsReservedAnnotation(%q) = %v, want %v", key, got, want)
		}
	}
}
