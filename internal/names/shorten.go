package names

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// Rule says how a derived name that is too long is shortened.
type Rule struct {
	// Max is the most bytes the result may have: 63 for a label value, 253
	// for an object name.
	Max int
	// Digits is how many hex digits of the hash follow the cut.
	Digits int
	// Trim are the characters removed from the end of the cut, so that the
	// result stays a DNS subdomain ("" keeps the cut as it is).
	Trim string
}

// Shorten returns name when it is at most r.Max bytes long. Otherwise it
// returns the start of name (less any trailing characters in r.Trim), "-"
// and the first r.Digits hex digits of the SHA-256 of key: at most r.Max
// bytes, the same on every call and every replica, and distinct for
// distinct keys but by chance. key is what the name stands for (usually
// name itself).
func (r Rule) Shorten(name, key string) string {
	if len(name) <= r.Max {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	cut := name[:r.Max-1-r.Digits]
	if r.Trim != "" {
		cut = strings.TrimRight(cut, r.Trim)
	}
	return cut + "-" + hex.EncodeToString(sum[:])[:r.Digits]
}
