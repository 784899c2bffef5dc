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
}
