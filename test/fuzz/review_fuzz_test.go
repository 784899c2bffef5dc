package fuzz

import (
	"bytes"
	"reflect"
	"testing"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admission/v1"
	kjson "sigs.k8s.io/json"

	"github.com/deckhand-dev/deckhand/internal/inject/podjson"
)

// FuzzReviewDecoderMatchesTypedDecoding holds the pod webhook's own
// AdmissionReview reader (internal/inject/podjson.DecodeReview, which the webhook
// serves with instead of controller-runtime's decoding) to the typed
// decoding controller-runtime does: for every review the typed decoder
// accepts, the fast reader accepts it too and reads the same fields.
//
// Inputs are what the API server could send: UTF-8, keys matched
// case-sensitively.
func FuzzReviewDecoderMatchesTypedDecoding(f *testing.F) {
	for _, s := range []string{
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"requestKind":{"group":"","version":"v1","kind":"Pod"},"namespace":"prod","operation":"CREATE","userInfo":{"username":"admin","groups":["system:masters"],"extra":{"k":["v"]}},"object":{"metadata":{"generateName":"web-"},"spec":{"containers":[{"name":"app","image":"x"}]}},"oldObject":null,"dryRun":false,"options":{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}}}`,
		`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"a\"b\\c\u00e9","kind":{"kind":"Pod"},"operation":"UPDATE","subResource":"status","name":"web-0","namespace":"n","dryRun":true,"object":{"x":[1,2,{"y":"}"}]},"oldObject":{"a":"]"}}}`,
		`{"request":{"object":null,"dryRun":null,"kind":null,"uid":null}}`,
		`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
		` { "request" : { "uid" : "1" , "object" : { } } } `,
		`{"request":{"Uid":"upper","uid":"lower","futureField":[true,false,null,1.5e3]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !utf8.Valid(body) {
			return
		}
		var typed admissionv1.AdmissionReview
		if kjson.UnmarshalCaseSensitivePreserveInts(body, &typed) != nil {
			return
		}
		var fast podjson.Review
		if err := podjson.DecodeReview(body, &fast); err != nil {
			t.Fatalf("the typed decoder reads it, the fast one says %v\n%s", err, body)
		}
		want := podjson.Review{APIVersion: typed.APIVersion, Kind: typed.Kind}
		if r := typed.Request; r != nil {
			want.UID, want.ObjectKind = string(r.UID), r.Kind.Kind
			want.Operation, want.SubResource = string(r.Operation), r.SubResource
			want.Namespace, want.Name = r.Namespace, r.Name
			want.DryRun = r.DryRun != nil && *r.DryRun
			want.UserName = r.UserInfo.Username
			want.Object = r.Object.Raw
		}
		if !reflect.DeepEqual(fast, want) && !(bytes.Equal(fast.Object, want.Object) && sameButObject(fast, want)) {
			t.Fatalf("fast %+v\ntyped %+v\n%s", fast, want, body)
		}
	})
}

// sameButObject compares the fields of two reviews other than Object (a
// nil and an empty object read the same).
func sameButObject(a, b podjson.Review) bool {
	a.Object, b.Object = nil, nil
	return reflect.DeepEqual(a, b)
}
