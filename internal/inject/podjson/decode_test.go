package podjson

import (
	"errors"
	"testing"
)

// TestDecodeRefusesWhatAPatchCannotApplyTo: a pod or review the patch could
// not apply to (no spec object, bytes after the value, broken JSON) is an
// error; a null review reads as an empty one and white space after the
// value is fine.
func TestDecodeRefusesWhatAPatchCannotApplyTo(t *testing.T) {
	pods := map[string]struct {
		json string
		want error
	}{
		"spec object":             {json: `{"metadata":{"name":"p"},"spec":{}}` + "\n"},
		"null":                    {json: `null`, want: ErrSyntax},
		"null spec":               {json: `{"spec":null}`, want: ErrNoSpec},
		"no spec":                 {json: `{"metadata":{}}`, want: ErrNoSpec},
		"bytes after the pod":     {json: `{"spec":{}} {}`, want: ErrSyntax},
		"unterminated":            {json: `{"spec":{}`, want: ErrSyntax},
		"labels not an object":    {json: `{"metadata":{"labels":"a"},"spec":{}}`, want: ErrSyntax},
		"container not an object": {json: `{"spec":{"containers":["a"]}}`, want: ErrSyntax},
	}
	for name, tc := range pods {
		t.Run("pod "+name, func(t *testing.T) {
			var p RawPod
			if err := DecodePod([]byte(tc.json), &p); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("DecodePod(%s) = %v, want %v", tc.json, err, tc.want)
			}
		})
	}
	reviews := map[string]struct {
		json string
		want error
	}{
		"null":                   {json: `null`},
		"request":                {json: `{"request":{"uid":"u","kind":{"kind":"Pod"}}} `},
		"bytes after the review": {json: `{} x`, want: ErrSyntax},
		"request not an object":  {json: `{"request":1}`, want: ErrSyntax},
	}
	for name, tc := range reviews {
		t.Run("review "+name, func(t *testing.T) {
			var r Review
			if err := DecodeReview([]byte(tc.json), &r); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Errorf("DecodeReview(%s) = %v, want %v", tc.json, err, tc.want)
			}
		})
	}
}
