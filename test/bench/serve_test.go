package bench

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/deckhand-dev/deckhand/internal/inject"
)

// The pod webhook served over HTTP, from the request body to the written
// response, for the 10-container pod and one matching SidecarSet: the
// injector's own handler (what the manager registers) against
// controller-runtime's admission.Webhook wrapping the same Handle.
// docs/sidecarset.md records the numbers.

// BenchmarkServePodWebhook: inject.Handler.ServeHTTP.
func BenchmarkServePodWebhook(b *testing.B) {
	benchServe(b, &inject.Handler{Lister: lister(b, sidecarSets(1))})
}

// BenchmarkServePodWebhookControllerRuntime: admission.Webhook{Handler: inject.Handler}.
func BenchmarkServePodWebhookControllerRuntime(b *testing.B) {
	benchServe(b, &admission.Webhook{Handler: &inject.Handler{Lister: lister(b, sidecarSets(1))}})
}

func benchServe(b *testing.B, h http.Handler) {
	// The manager's logger: production zap at info level.
	logf.SetLogger(zap.New(zap.UseDevMode(false), zap.WriteTo(io.Discard)))
	body := reviewBody(b)
	w := &discardWriter{header: http.Header{}}
	serve := func() {
		r, err := http.NewRequest(http.MethodPost, inject.PodWebhookPath, bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		w.buf.Reset()
		h.ServeHTTP(w, r)
	}
	serve()
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(w.buf.Bytes(), &out); err != nil || out.Response == nil || !out.Response.Allowed || len(out.Response.Patch) == 0 {
		b.Fatalf("no injection in %s (%v)", w.buf.Bytes(), err)
	}
	measure(b, serve)
}

// reviewBody is the AdmissionReview the API server sends for the pod of
// podRequest, with the fields a real request carries besides the object.
func reviewBody(b *testing.B) []byte {
	req := podRequest(b).AdmissionRequest
	req.UID = "705ab4f5-6393-11e8-b7cc-42010a800002"
	req.RequestKind, req.RequestResource = &req.Kind, &req.Resource
	req.UserInfo = authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:replicaset-controller", UID: "d1b4c1ac-4d2c-4f6a-9a8e-0b4a0e0b6f8e", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}}
	req.Options = runtime.RawExtension{Raw: []byte(`{"kind":"CreateOptions","apiVersion":"meta.k8s.io/v1"}`)}
	dry := false
	req.DryRun = &dry
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// discardWriter is an http.ResponseWriter that keeps the last body.
type discardWriter struct {
	header http.Header
	buf    bytes.Buffer
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }
func (w *discardWriter) WriteHeader(int)             {}
