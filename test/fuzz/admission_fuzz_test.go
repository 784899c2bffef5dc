package fuzz

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	deckhandv1alpha1 "github.com/deckhand-dev/deckhand/api/v1alpha1"
	"github.com/deckhand-dev/deckhand/internal/inject"
	podsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/podset"
	restartschedulewebhook "github.com/deckhand-dev/deckhand/internal/webhook/restartschedule"
	sidecarsetwebhook "github.com/deckhand-dev/deckhand/internal/webhook/sidecarset"
	"github.com/deckhand-dev/deckhand/internal/webhook/webhookutil"
	webserverwebhook "github.com/deckhand-dev/deckhand/internal/webhook/webserver"
)

// webhookPaths are Deckhand's admission endpoints, served here by the same
// handler types the manager registers (controller-runtime's admission.Webhook
// around Deckhand's typed defaulters/validators and the pod injector),
// without the API calls (no dry runs: there is no API server here).
var webhookPaths = []string{
	"/validate-apps-deckhand-dev-v1alpha1-podset",
	"/validate-apps-deckhand-dev-v1alpha1-webserver",
	"/validate-apps-deckhand-dev-v1alpha1-restartschedule",
	"/validate-apps-deckhand-dev-v1alpha1-sidecarset",
	"/mutate-apps-deckhand-dev-v1alpha1-sidecarset",
	inject.PodWebhookPath,
}

type admissionServer struct {
	*httptest.Server
	mu     sync.Mutex
	panics []string
}

var (
	admissionOnce sync.Once
	admissionSrv  *admissionServer
)

// admissionHTTP starts (once per process) an HTTP server with every webhook
// handler. Panics are recorded instead of being swallowed by net/http.
func admissionHTTP(t testing.TB) *admissionServer {
	admissionOnce.Do(func() {
		scheme := runtime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(scheme))
		utilruntime.Must(deckhandv1alpha1.AddToScheme(scheme))
		s := &deckhandv1alpha1.SidecarSet{}
		if err := json.Unmarshal([]byte(`{"metadata":{"name":"logging"},"spec":{"selector":{"matchLabels":{"app":"web"}},"containers":[{"name":"log","image":"fluent-bit:3","shareVolumePolicy":{"type":"enabled"}}]}}`), s); err != nil {
			panic(err)
		}
		sidecarsetwebhook.SetDefaults(s)
		injector := injectorFor(t, s)
		hooks := map[string]*admission.Webhook{
			webhookPaths[0]: admission.WithValidator[*deckhandv1alpha1.PodSet](scheme, webhookutil.CreateOrUpdate[*deckhandv1alpha1.PodSet]((&podsetwebhook.Validator{}).Validate)),
			webhookPaths[1]: admission.WithValidator[*deckhandv1alpha1.WebServer](scheme, &webserverwebhook.Validator{}),
			webhookPaths[2]: admission.WithValidator[*deckhandv1alpha1.RestartSchedule](scheme, &restartschedulewebhook.Validator{Now: fixedNow}),
			webhookPaths[3]: admission.WithValidator[*deckhandv1alpha1.SidecarSet](scheme, webhookutil.CreateOrUpdate[*deckhandv1alpha1.SidecarSet]((&sidecarsetwebhook.Validator{Lister: injector.Lister}).Validate)),
			webhookPaths[4]: admission.WithDefaulter[*deckhandv1alpha1.SidecarSet](scheme, sidecarsetwebhook.Defaulter{}),
			webhookPaths[5]: {Handler: injector},
		}
		srv := &admissionServer{}
		mux := http.NewServeMux()
		for path, h := range hooks {
			// Panics must reach the test, not be turned into responses.
			h.WithRecoverPanic(false)
			mux.Handle(path, h)
		}
		srv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if p := recover(); p != nil {
					srv.mu.Lock()
					srv.panics = append(srv.panics, fmt.Sprintf("%s: %v\n%s", r.URL.Path, p, debug.Stack()))
					srv.mu.Unlock()
					http.Error(w, "panic", http.StatusInternalServerError)
				}
			}()
			mux.ServeHTTP(w, r)
		}))
		admissionSrv = srv
	})
	return admissionSrv
}

// post sends body to path and returns the decoded AdmissionResponse. Every
// request must get a well-formed AdmissionReview back: allowed, or refused
// with a code and a message.
func (s *admissionServer) post(t testing.TB, path string, body []byte) *admissionv1.AdmissionResponse {
	t.Helper()
	resp, err := http.Post(s.URL+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	s.mu.Lock()
	panics := s.panics
	s.panics = nil
	s.mu.Unlock()
	if len(panics) > 0 {
		t.Fatalf("the webhook panicked on %s with body %.300q:\n%s", path, body, panics[0])
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: HTTP %d %s", path, resp.StatusCode, data)
	}
	review := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(data, review); err != nil || review.Response == nil {
		t.Fatalf("POST %s: not an AdmissionReview answer (%v): %.500s", path, err, data)
	}
	r := review.Response
	if !r.Allowed && (r.Result == nil || r.Result.Message == "" || r.Result.Code == 0) {
		t.Fatalf("POST %s: refused without a code and message: %+v", path, r)
	}
	return r
}

func review(kind, group, resource, op string, object, old string) string {
	o := object
	if o == "" {
		o = "null"
	}
	od := old
	if od == "" {
		od = "null"
	}
	return fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":%q,"version":"v1alpha1","kind":%q},"resource":{"group":%q,"version":"v1alpha1","resource":%q},"operation":%q,"namespace":"fz","name":"x","object":%s,"oldObject":%s,"userInfo":{"username":"fuzz"}}}`,
		group, kind, group, resource, op, o, od)
}

func FuzzAdmissionReview(f *testing.F) {
	const g = "apps.deckhand.dev"
	podset := `{"apiVersion":"apps.deckhand.dev/v1alpha1","kind":"PodSet","metadata":{"name":"web","namespace":"fz"},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx"}]}}}}`
	web := `{"apiVersion":"apps.deckhand.dev/v1alpha1","kind":"WebServer","metadata":{"name":"site","namespace":"fz"},"spec":{"image":"nginx"}}`
	rs := `{"apiVersion":"apps.deckhand.dev/v1alpha1","kind":"RestartSchedule","metadata":{"name":"n","namespace":"fz"},"spec":{"schedule":"0 3 * * *","target":{"targetRef":{"kind":"Deployment","name":"web"}},"maxConcurrent":1,"historyLimit":10,"concurrencyPolicy":"Forbid"}}`
	scs := `{"apiVersion":"apps.deckhand.dev/v1alpha1","kind":"SidecarSet","metadata":{"name":"s"},"spec":{"selector":{"matchLabels":{"app":"x"}},"containers":[{"name":"c","image":"busybox"}]}}`
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"fz","labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx"}]}}`
	seeds := []struct {
		path int
		body string
	}{
		{0, review("PodSet", g, "podsets", "CREATE", podset, "")},
		{0, review("PodSet", g, "podsets", "UPDATE", podset, podset)},
		{0, review("PodSet", g, "podsets", "UPDATE", podset, "")},
		{0, review("PodSet", g, "podsets", "DELETE", "", podset)},
		{0, review("Pod", "", "pods", "CREATE", pod, "")}, // wrong kind
		{1, review("WebServer", g, "webservers", "CREATE", web, "")},
		{1, review("WebServer", g, "webservers", "CREATE", rs, "")}, // wrong kind
		{1, review("WebServer", g, "webservers", "CONNECT", web, "")},
		{2, review("RestartSchedule", g, "restartschedules", "CREATE", rs, "")},
		{2, review("RestartSchedule", g, "restartschedules", "PATCH", rs, "")},
		{3, review("SidecarSet", g, "sidecarsets", "CREATE", scs, "")},
		{3, review("SidecarSet", g, "sidecarsets", "UPDATE", scs, scs)},
		{4, review("SidecarSet", g, "sidecarsets", "CREATE", scs, "")},
		{4, review("SidecarSet", g, "sidecarsets", "CREATE", `{"spec":[]}`, "")},
		{5, review("Pod", "", "pods", "CREATE", pod, "")},
		{5, review("Pod", "", "pods", "CREATE", podset, "")}, // wrong kind in the object
		{5, review("Pod", "", "pods", "CREATE", `"a string"`, "")},
		{5, review("PodSet", g, "podsets", "CREATE", podset, "")},
		{0, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"kind":`}, // malformed
		{1, `not json at all`},
		{2, ``},
		{3, `{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","object":{}}}`},
		{4, `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"b"}}`},
		{5, `{"request":null}`},
		{5, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"fz","object":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","env":[{"name":"A","value":"\ud800"}]}]}}}}`},
	}
	for _, s := range seeds {
		f.Add(uint8(s.path), []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, path uint8, body []byte) {
		srv := admissionHTTP(t)
		srv.post(t, webhookPaths[int(path)%len(webhookPaths)], body)
	})
}

// TestAdmissionHugeBodies: a body over controller-runtime's 7 MiB limit is
// refused with 413 and a message, and an object just under it (a PodSet with
// a 6 MiB annotation) gets an answer too, on every path.
func TestAdmissionHugeBodies(t *testing.T) {
	srv := admissionHTTP(t)
	huge := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","object":{"x":"` +
		strings.Repeat("a", 8<<20) + `"}}}`)
	big := review("PodSet", "apps.deckhand.dev", "podsets", "CREATE",
		`{"metadata":{"name":"web","annotations":{"big":"`+strings.Repeat("b", 6<<20)+`"}},"spec":{"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"app","image":"nginx"}]}}}}`, "")
	for _, p := range webhookPaths {
		r := srv.post(t, p, huge)
		if r.Allowed || r.Result.Code != http.StatusRequestEntityTooLarge || !strings.Contains(r.Result.Message, "too large") {
			t.Errorf("%s: an 8 MiB body: want 413 'too large', got allowed=%v %+v", p, r.Allowed, r.Result)
		}
		srv.post(t, p, []byte(big))
	}
	// Malformed and wrong-kind requests are refused with 400 and say why.
	r := srv.post(t, webhookPaths[0], []byte(`{"request":{"uid":"u","operation":"CREATE","object":{"kind":`))
	if r.Allowed || r.Result.Code != http.StatusBadRequest {
		t.Errorf("malformed JSON: want 400, got %+v", r)
	}
	r = srv.post(t, webhookPaths[1], []byte(review("Pod", "", "pods", "CREATE",
		`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{}}`, "")))
	if r.Allowed {
		t.Errorf("a Pod sent to the WebServer validator was allowed: %+v", r)
	}
}
