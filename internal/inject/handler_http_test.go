package inject

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
)

// TestServeHTTPAnswersAsControllerRuntime sends the same requests to the
// injector's own HTTP handler and to controller-runtime's admission.Webhook
// wrapping its Handle, and wants the same answers.
func TestServeHTTPAnswersAsControllerRuntime(t *testing.T) {
	l := testLister(t, nil, set("log", nil))
	web := pod(map[string]string{"app": "web"}, "app")
	other := pod(map[string]string{"app": "db"}, "app")
	review := func(mut func(*admissionv1.AdmissionRequest), p *corev1.Pod) []byte {
		req := podRequest(t, "prod", p).AdmissionRequest
		req.UID = "7c1c-\"quoted\"-uid"
		req.Name = "web-0"
		req.UserInfo = authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:replicaset-controller", Groups: []string{"a", "b"}}
		req.Options = runtime.RawExtension{Raw: []byte(`{"apiVersion":"meta.k8s.io/v1","kind":"CreateOptions"}`)}
		if mut != nil {
			mut(&req)
		}
		b, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request:  &req,
		})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name        string
		injector    *Handler
		body        []byte
		contentType string
		noLength    bool // send without Content-Length
		// decodeError: the request is malformed; the two decoders word
		// their errors differently, so only the code is compared.
		decodeError bool
	}{
		{name: "injects", body: review(nil, web)},
		{name: "injects, body of unknown length", body: review(nil, web), noLength: true},
		{name: "no match", body: review(nil, other)},
		{name: "dry run", body: review(func(r *admissionv1.AdmissionRequest) { r.DryRun = ptr.To(true) }, web)},
		{name: "dry run false", body: review(func(r *admissionv1.AdmissionRequest) { r.DryRun = ptr.To(false) }, web)},
		{name: "update", body: review(func(r *admissionv1.AdmissionRequest) {
			r.Operation = admissionv1.Update
			r.OldObject = r.Object
		}, web)},
		{name: "subresource", body: review(func(r *admissionv1.AdmissionRequest) { r.SubResource = "status" }, web)},
		{name: "protected namespace", body: review(func(r *admissionv1.AdmissionRequest) { r.Namespace = "kube-system" }, web)},
		{name: "not a pod", body: review(func(r *admissionv1.AdmissionRequest) { r.Kind.Kind = "Deployment" }, web)},
		{name: "namespace only in the object", body: review(func(r *admissionv1.AdmissionRequest) {
			r.Namespace = ""
			r.Object.Raw = bytes.Replace(r.Object.Raw, []byte(`"metadata":{`), []byte(`"metadata":{"namespace":"prod",`), 1)
		}, web)},
		{name: "object without spec", body: review(func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte(`{"metadata":{"name":"x"}}`) }, web)},
		{name: "no object", body: review(func(r *admissionv1.AdmissionRequest) { r.Object.Raw = nil }, web)},
		{name: "v1beta1 review", body: bytes.Replace(review(nil, web), []byte(`"admission.k8s.io/v1"`), []byte(`"admission.k8s.io/v1beta1"`), 1)},
		{name: "handler panics", injector: &Handler{}, body: review(nil, web)},
		{name: "malformed JSON", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":`), decodeError: true},
		{name: "empty body", body: nil, decodeError: true},
		{name: "wrong content type", body: review(nil, web), contentType: "application/yaml", decodeError: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inj := tc.injector
			if inj == nil {
				inj = &Handler{Lister: l}
			}
			serve := func(h http.Handler) (int, admissionv1.AdmissionReview) {
				var body io.Reader = http.NoBody
				if tc.body != nil {
					body = bytes.NewReader(tc.body)
				}
				r := httptest.NewRequest(http.MethodPost, PodWebhookPath, body)
				if tc.noLength {
					r.ContentLength = -1
				}
				r.Header.Set("Content-Type", "application/json")
				if tc.contentType != "" {
					r.Header.Set("Content-Type", tc.contentType)
				}
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				var out admissionv1.AdmissionReview
				if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
					t.Fatalf("response %q: %v", w.Body.String(), err)
				}
				if out.Response == nil {
					t.Fatalf("no response in %q", w.Body.String())
				}
				return w.Code, out
			}
			injected := func() float64 { return promtestutil.ToFloat64(podsInjected.WithLabelValues("log")) }
			before := injected()
			ownCode, own := serve(inj)
			// A dry run injects but is not counted.
			want := 0.0
			if len(own.Response.Patch) > 0 && tc.name != "dry run" {
				want = 1
			}
			if got := injected() - before; got != want {
				t.Errorf("%v injections counted, want %v", got, want)
			}
			crCode, cr := serve(&admission.Webhook{Handler: inj})
			if ownCode != crCode {
				t.Errorf("HTTP status %d, controller-runtime's %d", ownCode, crCode)
			}
			if tc.decodeError {
				if own.Response.Allowed || own.Response.Result == nil || cr.Response.Result == nil || own.Response.Result.Code != cr.Response.Result.Code {
					t.Errorf("answer %+v, controller-runtime's %+v", own.Response, cr.Response)
				}
				return
			}
			if own.TypeMeta != cr.TypeMeta {
				t.Errorf("review type %v, controller-runtime's %v", own.TypeMeta, cr.TypeMeta)
			}
			if !reflect.DeepEqual(own.Response, cr.Response) {
				t.Errorf("answer\n%+v\n%+v (controller-runtime's)", describe(own.Response), describe(cr.Response))
			}
			if tc.name == "injects" && len(own.Response.Patch) == 0 {
				t.Errorf("nothing injected: the case does not test the patch")
			}
		})
	}
}

func describe(r *admissionv1.AdmissionResponse) string {
	b, _ := json.Marshal(r)
	return strings.ReplaceAll(string(b), `\"`, `"`)
}
